package dev.ramtrain.trainer.data;

import dev.ramtrain.format.ShardReader;
import dev.ramtrain.threads.Uninterruptibly;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;

/**
 * Keeps a loader's shards in memory a window at a time: an epoch's windows ({@link WindowedOrder})
 * are read in order by one reader thread into slots of memory owned here, at most {@code
 * residentWindows} at once (two: the one being assembled from and the next, read ahead; more only
 * where a batch spans more windows than that, as tiny windows of small shards do), and each is
 * dropped as soon as the last batch drawing on it has been written. So the memory the shards take
 * is fixed, {@link #budgetBytes}, however large the dataset, and the page cache is left alone. (A
 * mapping with {@code madvise} would do the same for local files; reading into owned memory bounds
 * the resident set exactly, needs no native call, and streams shards from a Hadoop filesystem the
 * same way.)
 */
final class ShardWindows implements AutoCloseable {
  private final ShardSource source;
  private final int residentWindows;
  private final BufferAllocator allocator = new RootAllocator();
  private final ArrayDeque<ArrowBuf> freeSlots = new ArrayDeque<>();
  private final long slotBytes;
  private final long budgetBytes;
  private final ExecutorService reader;
  private long residentBytes; // guarded by this: slots holding a shard
  private long peakResidentBytes;

  ShardWindows(ShardSource source, int windowShards, int residentWindows) {
    this.source = source;
    this.residentWindows = residentWindows;
    long largest = 0;
    for (int s = 0; s < source.count(); s++) {
      largest = Math.max(largest, source.bytes(s));
    }
    this.slotBytes = largest;
    int slots = residentWindows * Math.min(windowShards, source.count());
    this.budgetBytes = slots * largest;
    try {
      for (int i = 0; i < slots; i++) {
        freeSlots.add(allocator.buffer(slotBytes));
      }
    } catch (RuntimeException | Error e) {
      freeSlots.forEach(ArrowBuf::close);
      allocator.close();
      throw e;
    }
    this.reader =
        Executors.newSingleThreadExecutor(
            r -> {
              Thread t = new Thread(r, "ramtrain-shard-reader");
              t.setDaemon(true);
              return t;
            });
  }

  int residentWindows() {
    return residentWindows;
  }

  /** The memory the shards may take at most: the resident windows of the largest shards. */
  long budgetBytes() {
    return budgetBytes;
  }

  /** The most memory shards have taken at once so far. */
  synchronized long peakResidentBytes() {
    return peakResidentBytes;
  }

  /**
   * Starts reading one epoch's windows: {@code windowShards[v]} are the shards of its v-th window
   * in the order batches need them, {@code batchesUsing[v]} how many of the batches still to be
   * written draw on it.
   */
  Pass start(int[][] windowShards, int[] batchesUsing) {
    Pass pass = new Pass(windowShards, batchesUsing);
    reader.execute(pass::readAll);
    return pass;
  }

  @Override
  public void close() {
    reader.shutdownNow();
    // A read in flight holds a slot: freeing the slots under it would free memory being written.
    if (!Uninterruptibly.awaitTermination(reader, Duration.ofMinutes(1))) {
      throw new IllegalStateException("the shard reader did not stop within a minute");
    }
    synchronized (this) {
      freeSlots.forEach(ArrowBuf::close);
      freeSlots.clear();
    }
    allocator.close();
  }

  /** One epoch's windows: read ahead in order, waited for by the workers, dropped when done. */
  final class Pass implements AutoCloseable {
    private final int[][] windowShards;
    private final int[] batchesUsing;
    private final LoadedShard[][] loaded; // [window][member], null until read
    private final ArrowBuf[][] slots;
    private RuntimeException failure; // the reader's, which stopped it at window failedAt
    private int failedAt = Integer.MAX_VALUE;
    private int resident; // windows read and not yet dropped
    private boolean closed;

    private Pass(int[][] windowShards, int[] batchesUsing) {
      this.windowShards = windowShards;
      this.batchesUsing = batchesUsing.clone();
      this.loaded = new LoadedShard[windowShards.length][];
      this.slots = new ArrowBuf[windowShards.length][];
    }

    /**
     * Windows {@code first..last}, once read (waits for them): what one batch draws on, looked up
     * without the lock while it is written (no window is dropped before {@link #written}).
     */
    Held hold(int first, int last) {
      LoadedShard[][] shards = new LoadedShard[last - first + 1][];
      synchronized (ShardWindows.this) {
        for (int w = first; w <= last; w++) {
          while (loaded[w] == null && w < failedAt && !closed) {
            try {
              ShardWindows.this.wait();
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
              throw new IllegalStateException("interrupted waiting for a window of shards", e);
            }
          }
          if (w >= failedAt) {
            throw failure; // this window and every later one will never be read
          }
          if (closed) {
            throw new IllegalStateException("the epoch was closed");
          }
          shards[w - first] = loaded[w];
        }
      }
      return new Held(first, shards);
    }

    /** The windows a batch draws on, read. */
    final class Held {
      private final int first;
      private final LoadedShard[][] shards; // [window - first][member]

      private Held(int first, LoadedShard[][] shards) {
        this.first = first;
        this.shards = shards;
      }

      /** Window {@code window}'s member {@code shard}. */
      LoadedShard shard(int window, int shard) {
        int[] members = windowShards[window];
        for (int m = 0; m < members.length; m++) {
          if (members[m] == shard) {
            return shards[window - first][m];
          }
        }
        throw new IllegalStateException("shard " + shard + " is not in window " + window);
      }
    }

    /** A batch drawing on windows {@code first..last} has been written. */
    void written(int first, int last) {
      synchronized (ShardWindows.this) {
        for (int w = first; w <= last; w++) {
          if (--batchesUsing[w] == 0) {
            drop(w);
          }
        }
      }
    }

    private void readAll() {
      for (int w = 0; w < windowShards.length; w++) {
        synchronized (ShardWindows.this) {
          while (!closed && (resident >= residentWindows || batchesUsing[w] == 0)) {
            if (batchesUsing[w] == 0) {
              break; // no batch left draws on it (a resumed epoch's earlier windows)
            }
            try {
              ShardWindows.this.wait();
            } catch (InterruptedException e) {
              return;
            }
          }
          if (closed) {
            return;
          }
          if (batchesUsing[w] == 0) {
            continue;
          }
          resident++;
        }
        if (!read(w)) {
          return;
        }
      }
    }

    /** Reads window {@code w}; false when it failed (the workers waiting on it are told). */
    private boolean read(int w) {
      int[] members = windowShards[w];
      LoadedShard[] shards = new LoadedShard[members.length];
      ArrowBuf[] taken = new ArrowBuf[members.length];
      try {
        for (int m = 0; m < members.length; m++) {
          synchronized (ShardWindows.this) {
            taken[m] = freeSlots.poll();
          }
          if (taken[m] == null) { // the loader sized the slots for the windows it holds at once
            throw new IllegalStateException("no free slot for window " + w);
          }
          int shard = members[m];
          ShardReader r = source.read(shard, taken[m].nioBuffer(0, (int) source.bytes(shard)));
          shards[m] = new LoadedShard(r, true);
        }
      } catch (IOException | RuntimeException e) {
        RuntimeException failure =
            e instanceof IOException io
                ? new UncheckedIOException(io.getMessage(), io)
                : (RuntimeException) e;
        synchronized (ShardWindows.this) {
          release(shards, taken);
          resident--;
          this.failure = failure;
          failedAt = w;
          ShardWindows.this.notifyAll();
        }
        return false;
      }
      synchronized (ShardWindows.this) {
        if (closed) {
          release(shards, taken);
          return false;
        }
        loaded[w] = shards;
        slots[w] = taken;
        long bytes = 0;
        for (ArrowBuf slot : taken) {
          bytes += slot == null ? 0 : slotBytes;
        }
        residentBytes += bytes;
        peakResidentBytes = Math.max(peakResidentBytes, residentBytes);
        ShardWindows.this.notifyAll();
      }
      return true;
    }

    private void drop(int w) {
      if (loaded[w] == null) {
        return;
      }
      release(loaded[w], slots[w]);
      residentBytes -= slotBytes * slots[w].length;
      loaded[w] = null;
      slots[w] = null;
      resident--;
      ShardWindows.this.notifyAll();
    }

    /** Closes the shards and hands their slots back; called holding the lock. */
    private void release(LoadedShard[] shards, ArrowBuf[] taken) {
      for (LoadedShard s : shards) {
        if (s != null) {
          s.close();
        }
      }
      for (ArrowBuf slot : taken) {
        if (slot != null) {
          freeSlots.add(slot);
        }
      }
    }

    /**
     * Stops reading: a worker still waiting for a window is told the epoch ended. The windows
     * already read stay until {@link #close}, as a worker may still be writing from one.
     */
    void stop() {
      synchronized (ShardWindows.this) {
        closed = true;
        ShardWindows.this.notifyAll();
      }
    }

    /** Stops reading and drops every window still held; the workers must be done with them. */
    @Override
    public void close() {
      synchronized (ShardWindows.this) {
        closed = true;
        for (int w = 0; w < loaded.length; w++) {
          drop(w);
        }
        ShardWindows.this.notifyAll();
      }
    }
  }
}
