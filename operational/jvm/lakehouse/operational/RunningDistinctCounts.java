package lakehouse.operational;

import java.sql.Timestamp;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
import org.apache.spark.sql.streaming.MapState;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import scala.jdk.javaapi.CollectionConverters;

import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.concat;
import static org.apache.spark.sql.functions.lit;
import static org.apache.spark.sql.functions.unix_millis;

/**
 * Each page window's running count of distinct eventIds, one row out per eventId first seen in it once
 * the count has reached the caller's least count: (pageId, windowStart, windowEnd, clickCount); and a row
 * with clickCount 0 per click dropped as late, for the caller to count (Spark counts late rows only for
 * its own operators). The hot-page rule itself (which counts alert, hence the least count worth writing)
 * stays in Python (shared/rule.py); this is only the counting, in one stateful operator.
 *
 * <p>Why Java: Spark 4.3's real-time mode runs transformWithState written for the JVM, not Python's. Its
 * state is cleared during the batch, window by window, as processing-time timers find the watermark past
 * a window's end; Spark's dropDuplicates finishes its eviction by scanning its whole state at each batch
 * end, and no alert leaves meanwhile.
 *
 * <p>The watermark is the query's event-time watermark (declared upstream with withWatermark): an event
 * whose window ended at or before it is late and not counted, and a window's state goes once the
 * watermark passes its end, never before, however long the stream is idle or down.
 *
 * <pre>
 *   Dataset&lt;Row&gt; counts = RunningDistinctCounts.of(windowedEvents, 30000, 5001);
 * </pre>
 */
public final class RunningDistinctCounts extends StatefulProcessor<String, Row, Row> {
  private static final long serialVersionUID = 1L;

  private final long recheckMs;
  private final long leastCount;
  private transient MapState<String, Boolean> eventIds;
  private transient ValueState<Long> clickCount;

  private RunningDistinctCounts(long recheckMs, long leastCount) {
    this.recheckMs = recheckMs;
    this.leastCount = leastCount;
  }

  /**
   * The running counts of `events` (pageId, windowStart, windowEnd, eventId; a watermark declared on
   * their event time), from `leastCount` on. A window's state is looked at every `recheckMs` of
   * processing time from its first event on, and cleared at the first look after the watermark passed
   * its end.
   */
  public static Dataset<Row> of(Dataset<Row> events, long recheckMs, long leastCount) {
    Dataset<Row> input = events.select("pageId", "windowStart", "windowEnd", "eventId");
    StructType counts = new StructType(Arrays.copyOf(input.schema().fields(), 3))
        .add("clickCount", DataTypes.LongType, false);
    // The key leads with the window's end, which the timer reads back; pageId is the rest, whatever it
    // holds. A column, not a function: the rows are then deserialized once, for the processor only. Its
    // name is the one a String key's column has ("value"); the state's schema needs a plain name.
    Column key = concat(unix_millis(col("windowEnd")).cast("string"), lit(" "), col("pageId")).as("value");
    return input
        .groupBy(key)
        .as(Encoders.STRING(), Encoders.row(input.schema()))
        .transformWithState(new RunningDistinctCounts(recheckMs, leastCount), TimeMode.ProcessingTime(),
                            OutputMode.Update(), Encoders.row(counts));
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    eventIds = getHandle().getMapState("eventIds", Encoders.STRING(), Encoders.BOOLEAN(), TTLConfig.NONE());
    clickCount = getHandle().getValueState("clickCount", Encoders.LONG(), TTLConfig.NONE());
  }

  @Override
  public scala.collection.Iterator<Row> handleInputRows(String key, scala.collection.Iterator<Row> rows,
                                                       TimerValues timerValues) {
    long watermark = timerValues.getCurrentWatermarkInMs();
    List<Row> out = new ArrayList<>();
    Long before = clickCount.get();
    long count = before == null ? 0L : before;
    while (rows.hasNext()) {
      Row event = rows.next();  // pageId, windowStart, windowEnd, eventId
      if (millis(event.get(2)) <= watermark) {  // late: its window has closed
        out.add(RowFactory.create(event.get(0), event.get(1), event.get(2), 0L));
        continue;
      }
      String eventId = event.getString(3);
      if (eventIds.containsKey(eventId)) {
        continue;
      }
      eventIds.updateValue(eventId, Boolean.TRUE);
      count += 1;
      if (count >= leastCount) {
        out.add(RowFactory.create(event.get(0), event.get(1), event.get(2), count));
      }
    }
    if (before == null && count > 0) {
      getHandle().registerTimer(timerValues.getCurrentProcessingTimeInMs() + recheckMs);
    }
    if (before == null ? count > 0 : count != before) {
      clickCount.update(count);
    }
    return CollectionConverters.asScala(out.iterator());
  }

  @Override
  public scala.collection.Iterator<Row> handleExpiredTimer(String key, TimerValues timerValues,
                                                           ExpiredTimerInfo expiredTimerInfo) {
    long windowEnd = Long.parseLong(key.substring(0, key.indexOf(' ')));
    if (windowEnd <= timerValues.getCurrentWatermarkInMs()) {
      eventIds.clear();
      clickCount.clear();
    } else {
      getHandle().registerTimer(timerValues.getCurrentProcessingTimeInMs() + recheckMs);
    }
    return CollectionConverters.asScala(Collections.<Row>emptyIterator());
  }

  private static long millis(Object time) {
    return time instanceof Instant ? ((Instant) time).toEpochMilli() : ((Timestamp) time).getTime();
  }
}
