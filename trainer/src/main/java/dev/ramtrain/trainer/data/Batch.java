package dev.ramtrain.trainer.data;

import dev.ramtrain.trainer.backend.HostBuffer;

/**
 * One batch in pinned staging memory: {@code size} uint8 HWC images back to back, and their I32
 * labels. Valid until {@link #release}, which hands the staging slot back to the loader: call it
 * once the device copy from it has completed.
 */
public final class Batch {
  private final int index;
  private final int size;
  private final HostBuffer pixels;
  private final HostBuffer labels;
  private final Runnable release;

  Batch(int index, int size, HostBuffer pixels, HostBuffer labels, Runnable release) {
    this.index = index;
    this.size = size;
    this.pixels = pixels;
    this.labels = labels;
    this.release = release;
  }

  public int index() {
    return index;
  }

  public int size() {
    return size;
  }

  public HostBuffer pixels() {
    return pixels;
  }

  public HostBuffer labels() {
    return labels;
  }

  public void release() {
    release.run();
  }
}
