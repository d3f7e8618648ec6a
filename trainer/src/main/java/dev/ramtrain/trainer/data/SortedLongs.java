package dev.ramtrain.trainer.data;

/** Search in ascending arrays that may repeat values (empty batches, empty windows). */
final class SortedLongs {
  private SortedLongs() {}

  /** The index of the first value above {@code value}; the length when there is none. */
  static int firstAbove(long[] ascending, long value) {
    int low = 0;
    int high = ascending.length;
    while (low < high) {
      int mid = (low + high) >>> 1;
      if (ascending[mid] <= value) {
        low = mid + 1;
      } else {
        high = mid;
      }
    }
    return low;
  }
}
