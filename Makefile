# Two commands matter: `make demo` and `make test`. Both run `setup` first, which is idempotent
# and takes about a second when nothing changed (stamp files track pyproject.toml and the poms).
# Two jobs at a time: a first set-up installs one runtime's packages while Maven resolves jars (one run
# for every folder), and writes both runtimes' class archives side by side (each mostly one core's work).
MAKEFLAGS += --jobs=2

PYTHON   ?= python3
VENV     := .venv
BIN      := $(VENV)/bin
# The fast path's runtime (pyspark 4.3, real-time mode): a virtualenv of its own (shared/runtime.py).
FAST_VENV := .venv-fast
FAST_BIN := $(FAST_VENV)/bin
JARS     := .jars
TOOLS    := .tools
MVN      ?= mvn
JAR_POMS := pom.xml $(wildcard conf/jars/*.xml)
PYTEST_ARGS ?=
# The test tiers (tests/tiers.py), and those a `make test` runs: one pytest process runs them all, so one
# broker, one SparkSession and one object store serve every tier (CI: TIERS="$(ALL_TIERS)"); two more run
# beside it (below).
ALL_TIERS := unit spark integration commands faults deployment
TIERS    ?= unit spark integration
# --junitxml=<dir>/<runtime>.xml for each runtime's pytest when set (CI compares them: tests/durations.py)
JUNIT_DIR ?=
empty    :=
space    := $(empty) $(empty)
any_of    = ($(subst $(space), or ,$(strip $(1))))
# pytest's -m for TIERS: a test's folder gives its tier, and a crash-suite test in another folder also
# carries `faults`, which decides (tests/realtime/test_hostile_input.py runs with the faults)
MARKERS  := $(call any_of,$(TIERS))$(if $(filter faults,$(TIERS)),, and not faults)
junit     = $(if $(JUNIT_DIR),--junitxml=$(JUNIT_DIR)/$(1).xml)
# javac and jar from the JDK whose java runs Spark (JAVA_HOME's, else the one on the PATH)
JDK_BIN  := $(if $(JAVA_HOME),$(JAVA_HOME)/bin/,$(dir $(realpath $(shell command -v java))))
OPERATORS_SRC := $(wildcard operational/jvm/lakehouse/operational/*.java)
OPERATORS_JAR := $(JARS)/fast/lakehouse-operational.jar
# The embedded broker's first start formats its storage in the broker's own JVM (lakehouse/services/jvm)
BROKER_SRC := $(wildcard lakehouse/services/jvm/lakehouse/services/*.java)
BROKER_JAR := $(JARS)/broker/lakehouse-broker.jar

.PHONY: help setup prerequisites test test-all test-unit test-spark test-integration test-commands test-faults test-deployment demo clean clean-run

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-18s %s\n", $$1, $$2}'

setup: prerequisites $(BIN)/.installed $(FAST_BIN)/.installed $(JARS)/.resolved $(OPERATORS_JAR) $(BROKER_JAR) $(JARS)/class-archive/.written-medallion $(JARS)/class-archive/.written-fast-path $(TOOLS)/prometheus/.checked $(TOOLS)/prometheus-alertmanager/.checked  ## both runtimes' virtualenvs, packages, JVM jars, the JVM's class archive, Prometheus and Alertmanager (idempotent)

prerequisites:
	@$(PYTHON) -m lakehouse.prerequisites

$(BIN)/.installed: pyproject.toml constraints.txt | prerequisites
	@echo "setup: virtualenv and Python packages (first run downloads pyspark, ~1-2 min)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install -q --upgrade pip > $(VENV)/pip.log 2>&1 || (cat $(VENV)/pip.log; exit 1)
	@$(BIN)/python -m pip install -q -c constraints.txt -e '.[medallion,dev,notebooks,readers]' >> $(VENV)/pip.log 2>&1 || (cat $(VENV)/pip.log; exit 1)
	@touch $@

$(FAST_BIN)/.installed: pyproject.toml constraints-fast.txt | prerequisites
	@echo "setup: the fast path's virtualenv (pyspark 4.3 for real-time mode; first run ~1-2 min)"
	@test -x $(FAST_BIN)/python || $(PYTHON) -m venv $(FAST_VENV)
	@$(FAST_BIN)/python -m pip install -q --upgrade pip > $(FAST_VENV)/pip.log 2>&1 || (cat $(FAST_VENV)/pip.log; exit 1)
	@$(FAST_BIN)/python -m pip install -q -c constraints-fast.txt -e '.[fast-path,dev]' >> $(FAST_VENV)/pip.log 2>&1 || (cat $(FAST_VENV)/pip.log; exit 1)
	@touch $@

# Every folder of JVM jars in one Maven run (pom.xml's modules, conf/jars): each runtime's Spark jars (Kafka
# connector, Delta, S3A), the broker's and the object store's classpaths. The compiled jars beside them stay.
$(JARS)/.resolved: $(JAR_POMS) | prerequisites
	@echo "setup: the JVM jars (both Sparks' Kafka connector, Delta and S3A; the broker; S3Proxy) with Maven into $(JARS)"
	@rm -rf $(JARS)/spark $(JARS)/fast $(JARS)/broker $(JARS)/s3proxy
	@$(MVN) -B -q -f pom.xml dependency:copy-dependencies
	@touch $@

# The fast path's JVM operator (operational/jvm), compiled against the fast runtime's own Spark jars:
# no Spark 4.3.0 artifact resolves from Maven Central. It lands in $(JARS)/fast, which spark.jars ships.
$(OPERATORS_JAR): $(OPERATORS_SRC) $(JARS)/.resolved $(FAST_BIN)/.installed
	@echo "setup: the fast path's JVM operator ($(OPERATORS_SRC)) compiled into $@"
	@rm -rf $(JARS)/operator-classes && mkdir -p $(JARS)/operator-classes
	@$(JDK_BIN)javac --release 17 -Xlint:all,-path -Werror -d $(JARS)/operator-classes \
		-cp "$$($(FAST_BIN)/python -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')/jars/*" $(OPERATORS_SRC)
	@$(JDK_BIN)jar --create --file $@.tmp -C $(JARS)/operator-classes . && mv $@.tmp $@  # a running JVM keeps the old one

$(JARS)/class-archive/.written-medallion: $(BIN)/.installed $(JARS)/.resolved
	@echo "setup: the medallion runtime's Spark JVM class-data archive (about 40 s, once; every command then starts ~8 s sooner)"
	@$(BIN)/python -m lakehouse.class_archive
	@mkdir -p $(JARS)/class-archive && touch $@

$(JARS)/class-archive/.written-fast-path: $(FAST_BIN)/.installed $(JARS)/.resolved $(OPERATORS_JAR)
	@echo "setup: the fast path runtime's Spark JVM class-data archive (about 40 s, once)"
	@$(FAST_BIN)/python -m lakehouse.class_archive
	@mkdir -p $(JARS)/class-archive && touch $@

$(BROKER_JAR): $(BROKER_SRC) $(JARS)/.resolved
	@echo "setup: the embedded broker's format-then-run class ($(BROKER_SRC)) compiled into $@"
	@rm -rf $(JARS)/broker-classes && mkdir -p $(JARS)/broker-classes
	@$(JDK_BIN)javac --release 17 -Xlint:all,-path -Werror -d $(JARS)/broker-classes -cp "$(JARS)/broker/*" $(BROKER_SRC)
	@$(JDK_BIN)jar --create --file $@.tmp -C $(JARS)/broker-classes . && mv $@.tmp $@

# Prometheus and promtool for the monitoring tests (conf/prometheus/): found on the PATH, or Debian's
# package unpacked into $(TOOLS)/prometheus without root. Optional: where that cannot be done (no
# apt-get, no network) it says why and set-up goes on; those tests then skip with the reason (and fail
# in CI, which sets LAKEHOUSE_TESTS_SKIP=never). Tried
# once; `rm $(TOOLS)/prometheus/.checked` to try again.
$(TOOLS)/prometheus/.checked: $(BIN)/.installed
	@$(BIN)/python -m lakehouse.services.prometheus install || echo "setup: Prometheus not installed (optional)"
	@mkdir -p $(TOOLS)/prometheus && touch $@

# Alertmanager and amtool, the same way (`lakehouse alertmanager start`, conf/alertmanager.yml).
$(TOOLS)/prometheus-alertmanager/.checked: $(BIN)/.installed
	@$(BIN)/python -m lakehouse.services.alertmanager install || echo "setup: Alertmanager not installed (optional)"
	@mkdir -p $(TOOLS)/prometheus-alertmanager && touch $@

# The pytest processes share one broker: the last one below starts it, the others wait for it, and it
# stops it once they have ended (LAKEHOUSE_TESTS_BROKER, tests/conftest.py).
# The fast path's runtime runs its tests (tests/realtime) beside the medallion's, its output shown when both are
# done; whatever ends the one ends the other. With the deployment tier, its pytest then runs the benchmarks'
# tests too: they drive the product only through `lakehouse bench` (no Spark in the test's process), and fill
# the core the medallion's in-process integration tests leave idle (one Spark job at a time). Not more: the
# deployment suite's other commands beside the medallion's own commands tier starve `run`'s niced medallion
# (CONTRIBUTING.md, "What the suite costs").
SECOND_LANE := tests/deployment/test_benchmarks.py
FAST_TESTS := $(filter integration faults deployment,$(TIERS))
# A second pytest of the medallion's runtime runs these modules beside the first's unit, spark and other
# integration tests: in-process streams and backfills keep about one core busy each (one Spark job at a
# time), two keep both. The first's commands, crash and deployment tiers wait for both other pytests to end
# (LAKEHOUSE_TESTS_AFTER_PIDS, tests/tiers.py), for the reason above.
# Without the deployment tier, the benchmarks' tests (MOVED, below) leave it room for the sessions' too: the two end
# together then.
LANE := $(strip $(if $(filter integration,$(TIERS)),tests/integration/test_reconciliation.py tests/integration/test_analytical_cli.py \
        tests/integration/test_quality.py $(if $(filter deployment,$(TIERS)),,tests/integration/test_user_sessions.py)) \
        $(if $(filter commands,$(TIERS)),tests/commands/test_notebooks.py))
# Three of the benchmarks' tests run in that second pytest instead of the fast path's, which otherwise ends
# last before the barrier (their commands run in their own processes, from either runtime's pytest).
MOVED := $(if $(LANE),$(if $(filter deployment,$(TIERS)),\
        tests/deployment/test_benchmarks.py::test_bench_latency_reports_each_configuration_it_ran_and_misses_no_window \
        tests/deployment/test_benchmarks.py::test_bench_sessions_reports_the_state_after_each_step_and_it_evicts_what_the_watermark_closes \
        tests/deployment/test_benchmarks.py::test_bench_notify_delivers_every_alerted_window_once_and_again_through_a_bridge_kill_and_an_alertmanager_outage))

test: setup  ## the unit, spark and integration tiers (real broker, Spark, Delta) in both runtimes; TIERS="..." picks others
	@status=0; fast=; lane=; fast_log=$$(mktemp); lane_log=$$(mktemp); \
	$(if $(FAST_TESTS)$(LANE),export LAKEHOUSE_TESTS_BROKER=$$(mktemp -d) LAKEHOUSE_TESTS_BROKER_OWNER=;) \
	trap 'for pid in $$fast $$lane; do kill $$pid 2>/dev/null; done; rm -rf "$$fast_log" "$$lane_log" "$$LAKEHOUSE_TESTS_BROKER"' EXIT; trap 'exit 130' INT TERM; \
	$(if $(FAST_TESTS),$(FAST_BIN)/pytest tests/realtime $(SECOND_LANE) $(addprefix --deselect=,$(MOVED)) -m "$(MARKERS)" $(call junit,fast-path) $(PYTEST_ARGS) > "$$fast_log" 2>&1 & fast=$$!;) \
	$(if $(LANE),$(BIN)/pytest $(LANE) $(MOVED) -m "$(MARKERS)" $(call junit,medallion-2) $(PYTEST_ARGS) > "$$lane_log" 2>&1 & lane=$$!;) \
	LAKEHOUSE_TESTS_AFTER_PIDS="$$fast $$lane" LAKEHOUSE_TESTS_BROKER_OWNER=$(if $(FAST_TESTS)$(LANE),1) $(BIN)/pytest -m "$(MARKERS)" $(if $(FAST_TESTS),--ignore=$(SECOND_LANE)) $(addprefix --ignore=,$(LANE)) $(call junit,medallion) $(PYTEST_ARGS) || status=$$?; \
	$(if $(LANE),wait $$lane || status=$$?; lane=; echo "== $(LANE) in a second pytest of the medallion's runtime"; cat "$$lane_log";) \
	$(if $(FAST_TESTS),wait $$fast || status=$$?; fast=; echo "== tests/realtime and the benchmarks' tests in the fast path's runtime ($(FAST_VENV))"; cat "$$fast_log";) \
	exit $$status

test-all:  ## every tier: what CI runs
	@$(MAKE) --no-print-directory test TIERS="$(ALL_TIERS)"

test-unit:  ## the unit tier: pure Python, no JVM, under a minute
	@$(MAKE) --no-print-directory test TIERS=unit

test-spark:  ## the spark tier: pure transforms and declarations on one local SparkSession, no broker
	@$(MAKE) --no-print-directory test TIERS=spark

test-integration:  ## the integration tier: real broker, Spark streams and Delta tables, in both runtimes
	@$(MAKE) --no-print-directory test TIERS=integration

test-commands:  ## run, operational and the notebooks as users run them, in processes of their own
	@$(MAKE) --no-print-directory test TIERS=commands

test-faults:  ## only the crash suite: kill -9 of run and of the broker under traffic, hostile input (both runtimes)
	@$(MAKE) --no-print-directory test TIERS=faults

test-deployment:  ## only the deployment suite: standalone clusters, SASL_SSL and SSL brokers, Prometheus scraping run, the object store
	@$(MAKE) --no-print-directory test TIERS=deployment

demo: setup  ## the whole story: broker, traffic, both paths, backfill, alerts, trends, check, reconcile, clean stop
	@$(BIN)/lakehouse demo

clean-run:  ## stop the embedded broker and delete .run/ (broker data, tables, checkpoints)
	-@test -x $(BIN)/lakehouse && $(BIN)/lakehouse kafka stop
	rm -rf .run

clean: clean-run  ## also delete the virtualenvs, the jars and .tools/
	rm -rf $(VENV) $(FAST_VENV) $(JARS) $(TOOLS)
