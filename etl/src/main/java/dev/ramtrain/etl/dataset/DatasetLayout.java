package dev.ramtrain.etl.dataset;

import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Names inside a dataset directory. A committed dataset is {@code manifest.json} plus the version
 * folder it points into ({@code v0001/train/part-00000.arrow}, {@code v0001/rejects.jsonl}); a
 * replacement lands in the next version folder beside it and the manifest's rename switches readers
 * over, so a reader sees one version or the other, whole.
 */
public final class DatasetLayout {
  public static final String MANIFEST = "manifest.json";
  public static final String REJECTS = "rejects.jsonl";

  /** Where a running job writes; never read by readers, cleaned by the next writer. */
  public static final String STAGING = "_staging";

  /** In every folder ramtrain stages or commits: the proof that it wrote that folder. */
  public static final String RUN_MARKER = "_ramtrain-run.json";

  private static final Pattern VERSION = Pattern.compile("v(\\d{4,9})");

  private DatasetLayout() {}

  public static String shardFile(String split, int shard) {
    return String.format("%s/part-%05d.arrow", split, shard);
  }

  public static String versionFolder(int version) {
    return String.format("v%04d", version);
  }

  /** The number of a version folder's name, or -1 for any other name. */
  public static int versionNumber(String name) {
    Matcher m = VERSION.matcher(name);
    return m.matches() ? Integer.parseInt(m.group(1)) : -1;
  }
}
