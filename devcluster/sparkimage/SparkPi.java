package org.apache.spark.examples;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.SparkSession;

/**
 * Estimates pi by throwing darts at the unit square, under the class name and output of Spark's own
 * example (its examples jar is not published where this machine can fetch it). Usage: SparkPi [slices]
 */
public final class SparkPi {
  private SparkPi() {}

  public static void main(String[] args) {
    SparkSession spark = SparkSession.builder().appName("Spark Pi").getOrCreate();
    int slices = args.length > 0 ? Integer.parseInt(args[0]) : 2;
    int n = (int) Math.min(100000L * slices, Integer.MAX_VALUE);
    // Spark's example samples the range 1 until n in `slices` partitions; each slice here counts
    // the darts of its share of that range instead of materialising it.
    long darts = n - 1L;
    List<Integer> sliceIndices = new ArrayList<>(slices);
    for (int i = 0; i < slices; i++) {
      sliceIndices.add(i);
    }
    JavaSparkContext jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
    long count =
        jsc.parallelize(sliceIndices, slices)
            .map(i -> insideCircle(darts * i / slices, darts * (i + 1) / slices))
            .reduce(Long::sum);
    System.out.println("Pi is roughly " + (4.0 * count / (n - 1)));
    spark.stop();
  }

  private static long insideCircle(long start, long end) {
    ThreadLocalRandom random = ThreadLocalRandom.current();
    long inside = 0;
    for (long i = start; i < end; i++) {
      double x = random.nextDouble() * 2 - 1;
      double y = random.nextDouble() * 2 - 1;
      if (x * x + y * y <= 1) {
        inside++;
      }
    }
    return inside;
  }
}
