package dev.ramtrain.etl.dataset;

/** File names inside a dataset directory. */
public final class DatasetLayout {
  public static final String MANIFEST = "manifest.json";
  public static final String REJECTS = "rejects.jsonl";

  /** Where a running job writes; never read by readers, removed by the next run. */
  public static final String STAGING = "_staging";

  private DatasetLayout() {}

  public static String shardFile(String split, int shard) {
    return String.format("%s/part-%05d.arrow", split, shard);
  }
}
