// Runs several spark-submit command lines in one JVM, one after another: a JVM and Spark's
// Kubernetes client start once per Spark line instead of once per configuration (most of a
// spark-submit's ten seconds). Each argument file line is one spark-submit argument list, its
// arguments separated by \u0001. Every submission is fenced by marker lines on stderr (where Spark
// logs), so that the caller can tell each submission's log and outcome apart.
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

public final class BatchSubmit {
    private BatchSubmit() {}

    public static void main(String[] argv) throws Exception {
        List<String> lines = Files.readAllLines(Path.of(argv[0]), StandardCharsets.UTF_8);
        // By reflection, so that this file compiles without Spark on the class path (one class for all lines).
        Method submit = Class.forName("org.apache.spark.deploy.SparkSubmit").getMethod("main", String[].class);
        for (int i = 0; i < lines.size(); i++) {
            String[] args = lines.get(i).split("\u0001", -1);
            System.err.println("=== sparkop-batch " + i + " start");
            System.err.flush();
            String outcome = "ok";
            try {
                submit.invoke(null, (Object) args);
            } catch (InvocationTargetException e) {
                e.getCause().printStackTrace();
                outcome = "failed";
            }
            System.err.flush();
            System.err.println("=== sparkop-batch " + i + " " + outcome);
            System.err.flush();
        }
        // Spark's Kubernetes client leaves non-daemon threads behind.
        System.exit(0);
    }
}
