package dev.ramtrain.jobs.train;

import java.io.IOException;
import java.io.InputStream;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;

/**
 * What built and runs this process, recorded in every checkpoint's state.json and shown by the
 * report: ramtrain's version and commit (written by the build into build.properties), Java's,
 * Spark's and Arrow's versions. A part that cannot be told is "unknown", never a failure.
 */
public final class BuildInfo {
  private static final String UNKNOWN = "unknown";

  private BuildInfo() {}

  public static Map<String, Object> record() {
    Properties build = properties(BuildInfo.class, "/dev/ramtrain/jobs/build.properties");
    Properties spark = properties(BuildInfo.class, "/spark-version-info.properties");
    Map<String, Object> info = new LinkedHashMap<>();
    info.put("ramtrain", build.getProperty("git.build.version", UNKNOWN));
    String commit = build.getProperty("git.commit.id.full", UNKNOWN);
    info.put(
        "commit",
        Boolean.parseBoolean(build.getProperty("git.dirty")) ? commit + " (with changes)" : commit);
    info.put("java", System.getProperty("java.version") + " " + System.getProperty("java.vendor"));
    info.put("spark", spark.getProperty("version", UNKNOWN));
    String arrow =
        org.apache.arrow.vector.VectorSchemaRoot.class.getPackage().getImplementationVersion();
    info.put("arrow", arrow != null ? arrow : UNKNOWN);
    return info;
  }

  private static Properties properties(Class<?> near, String resource) {
    Properties p = new Properties();
    try (InputStream in = near.getResourceAsStream(resource)) {
      if (in != null) {
        p.load(in);
      }
    } catch (IOException e) {
      // unknown, as for a resource that is missing
    }
    return p;
  }
}
