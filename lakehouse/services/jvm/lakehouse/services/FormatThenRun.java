package lakehouse.services;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Formats a new embedded broker's storage, then runs the broker, in one JVM: `kafka.tools.StorageTool
 * format` and `kafka.Kafka` would each start a JVM of their own (lakehouse/services/broker.py).
 *
 * <pre>
 * java -cp '.jars/broker/*' lakehouse.services.FormatThenRun kafka.Kafka SERVER_PROPERTIES CLUSTER_ID
 *     [SCRAM_MECHANISM SCRAM_USER PASSWORD_FILE]
 * </pre>
 *
 * The broker's command line names {@code kafka.Kafka} and its properties as a plain start's does, so
 * whatever recognises the broker's process recognises this one. The SCRAM user's password (the broker's
 * own user, which its listener logs in as) is read from its file, never taken from the command line.
 */
public final class FormatThenRun {
    private static final String BROKER = "kafka.Kafka";

    private FormatThenRun() {
    }

    public static void main(String[] args) throws Exception {
        if ((args.length != 3 && args.length != 6) || !BROKER.equals(args[0])) {
            System.err.println("usage: FormatThenRun kafka.Kafka SERVER_PROPERTIES CLUSTER_ID "
                    + "[SCRAM_MECHANISM SCRAM_USER PASSWORD_FILE]");
            System.exit(2);
        }
        String properties = args[1];
        List<String> format = new ArrayList<>(List.of(
                "format", "--standalone", "--ignore-formatted", "--cluster-id", args[2], "--config", properties));
        if (args.length == 6) {
            String password = Files.readString(Path.of(args[5]), StandardCharsets.UTF_8).strip();
            format.add("--add-scram");
            format.add(args[3] + "=[name=" + args[4] + ",password=" + password + "]");
        }
        int formatted;
        try {
            formatted = kafka.tools.StorageTool.execute(format.toArray(String[]::new), System.out);
        } catch (Exception failure) {  // StorageTool's own main prints a refusal's message, not its trace
            System.err.println("formatting the broker storage failed: " + failure.getMessage());
            formatted = 1;
        }
        if (formatted != 0) {
            System.exit(formatted);
        }
        kafka.Kafka.main(new String[] {properties});
    }
}
