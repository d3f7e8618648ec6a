package dev.ramtrain.trainer.backend;

/** Byte counts as people read them in plans, budgets and errors: "9.39 GiB", "196.0 MiB". */
public final class ByteSize {
  private ByteSize() {}

  public static String of(long bytes) {
    return bytes >= 1L << 30
        ? String.format("%.2f GiB", bytes / (double) (1L << 30))
        : String.format("%.1f MiB", bytes / (double) (1L << 20));
  }
}
