package dev.ramtrain.trainer.data;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.format.ShardBatch;
import dev.ramtrain.format.ShardReader;
import dev.ramtrain.format.ids.SampleIds;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.HostBuffer;
import java.nio.IntBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import org.apache.arrow.memory.util.MemoryUtil;

/**
 * Streams batches from memory-mapped shards into pinned staging buffers. Each epoch shuffles all
 * samples with a generator seeded by (seed, epoch) and gives this rank its slice of every global
 * batch (or, where each rank has shards of its own, shuffles those by (seed, epoch, rank)); worker
 * threads assemble batches, writing each image once, from the shard into staging, with its random
 * crop (padded, or resized: {@link InputResize}, by a {@link CropResampler}) and flip drawn from
 * (seed, epoch, sample id). So what a batch holds never depends on thread timing, and batches come
 * out in order whatever order the workers finish in.
 */
public final class DataLoader implements AutoCloseable {
  private final ShardSet shards;
  private final LoaderOptions options;
  private final ImageShape stored; // the shards' images
  private final ImageShape shape; // the batches' images: stored, or resized
  private final ShardBatch[][] batches; // [shard][record batch], views into the mapped shards
  private final long[] index; // sample -> shard << 40 | record batch << 20 | row
  private final ExecutorService workers;
  private final List<HostBuffer> pixelSlots = new ArrayList<>();
  private final List<HostBuffer> labelSlots = new ArrayList<>();
  private final AtomicLong stallNanos = new AtomicLong();
  private final AtomicLong workNanos = new AtomicLong(); // the workers' time assembling batches
  private final AtomicLong resizeNanos = new AtomicLong(); // of it, resizing crops
  private final AtomicLong assembled = new AtomicLong(); // samples the workers have written
  private final Supplier<? extends CropResampler> resamplers;

  public DataLoader(Backend backend, ShardSet shards, LoaderOptions options) {
    this(backend, shards, options, AntialiasedResize::new);
  }

  /**
   * A loader resizing crops ({@link LoaderOptions.Augmentation#resize}) with the resamplers {@code
   * resamplers} makes, one per batch being assembled.
   */
  public DataLoader(
      Backend backend,
      ShardSet shards,
      LoaderOptions options,
      Supplier<? extends CropResampler> resamplers) {
    this.resamplers = resamplers;
    this.shards = shards;
    this.options = options;
    this.stored = shards.shape();
    this.shape = options.inputShape(stored);
    List<ShardReader> readers = shards.readers();
    this.batches = new ShardBatch[readers.size()][];
    List<Long> samples = new ArrayList<>();
    try {
      for (int s = 0; s < readers.size(); s++) {
        ShardReader reader = readers.get(s);
        batches[s] = new ShardBatch[reader.batchCount()];
        for (int b = 0; b < reader.batchCount(); b++) {
          batches[s][b] = reader.batch(b);
          for (int r = 0; r < batches[s][b].rowCount(); r++) {
            samples.add((long) s << 40 | (long) b << 20 | r);
          }
        }
      }
      this.index = samples.stream().mapToLong(Long::longValue).toArray();
      requireSamples();
      for (int i = 0; i < options.prefetch(); i++) {
        pixelSlots.add(
            backend.allocateHost("loader.pixels." + i, (long) options.batchSize() * shape.bytes()));
        labelSlots.add(backend.allocateHost("loader.labels." + i, 4L * options.batchSize()));
      }
    } catch (RuntimeException | Error e) {
      releaseMemory(); // nobody else can: the constructor does not return
      throw e;
    }
    this.workers =
        Executors.newFixedThreadPool(
            options.workers(),
            r -> {
              Thread t = new Thread(r, "ramtrain-loader");
              t.setDaemon(true);
              return t;
            });
  }

  private void requireSamples() {
    boolean evaluatesOwnShards =
        options.rank().ownShards()
            && options.sampling().remainder() == LoaderOptions.Remainder.KEEP;
    if (!evaluatesOwnShards && index.length == 0) {
      throw new IllegalArgumentException(
          "no samples for rank " + options.rank().rank() + " of " + options.rank().worldSize());
    }
    if (options.rank().ownShards()
        && options.sampling().remainder() == LoaderOptions.Remainder.DROP
        && options.rank().ownShare() > index.length) {
      throw new IllegalArgumentException(
          String.format(
              "rank %d holds %d samples and was asked for %d per epoch without padding",
              options.rank().rank(), index.length, options.rank().ownShare()));
    }
  }

  /** The shape of the images in this loader's batches: the stored one, or the resize's. */
  public ImageShape shape() {
    return shape;
  }

  public long samples() {
    return index.length;
  }

  /**
   * Samples this rank sees per epoch: DROP and PAD in whole steps (a batch on every rank, times the
   * batches accumulated into a step), the last one dropped or filled by wrapping around; KEEP every
   * sample once over the ranks.
   */
  long perRank() {
    LoaderOptions.Rank rank = options.rank();
    int world = rank.worldSize();
    LoaderOptions.Remainder remainder = options.sampling().remainder();
    long stepOfRank = (long) options.batchSize() * options.batchesPerStep();
    if (rank.ownShards()) {
      return remainder == LoaderOptions.Remainder.KEEP
          ? index.length
          : wholeSteps(rank.ownShare(), stepOfRank, remainder) * stepOfRank;
    }
    return switch (remainder) {
      case PAD, DROP -> wholeSteps(index.length, stepOfRank * world, remainder) * stepOfRank;
      // Positions rank, rank + world, ... below the sample count: every sample on one rank.
      case KEEP -> (index.length - rank.rank() + world - 1) / world;
    };
  }

  private static long wholeSteps(long samples, long step, LoaderOptions.Remainder remainder) {
    return remainder == LoaderOptions.Remainder.PAD ? (samples + step - 1) / step : samples / step;
  }

  /** Batches per optimizer step: the unit of the remainder rule. */
  public int batchesPerStep() {
    return options.batchesPerStep();
  }

  /** Whether every rank of the loader's world gets the same number of batches, full ones. */
  public boolean sameBatchesOnEveryRank() {
    return options.sampling().remainder() != LoaderOptions.Remainder.KEEP;
  }

  public int batchesPerEpoch() {
    long b = options.batchSize();
    return (int)
        (options.sampling().remainder() == LoaderOptions.Remainder.DROP
            ? perRank() / b
            : (perRank() + b - 1) / b);
  }

  /**
   * The samples of batch {@code index} of every epoch: the batch size, but for the last batch under
   * KEEP, which holds what is left (gradient accumulation weighs its micro-batches by it).
   */
  public int batchSize(int index) {
    long count =
        options.sampling().remainder() == LoaderOptions.Remainder.KEEP
            ? perRank()
            : (long) batchesPerEpoch() * options.batchSize();
    return (int) Math.min(options.batchSize(), count - (long) index * options.batchSize());
  }

  /** Nanoseconds the consumer has waited for batches so far (the data stall). */
  public long stallNanos() {
    return stallNanos.get();
  }

  /**
   * What the workers have done so far: samples written, and the nanoseconds spent writing them and,
   * of those, resizing crops. Their differences over an epoch give the loader's own rate ({@code
   * workers} × samples / work time: what it could feed with the cores to itself) and the time a
   * crop takes.
   */
  public record Work(long samples, long nanos, long resizeNanos, int workers) {
    /** Samples a second the loader makes, from its own work between {@code before} and this. */
    public double samplesPerSecondSince(Work before) {
      long n = nanos - before.nanos;
      return n <= 0 ? 0 : workers * (samples - before.samples) / (n / 1e9);
    }

    /** Milliseconds of resizing a sample took on average between {@code before} and this. */
    public double resizeMillisPerSampleSince(Work before) {
      long k = samples - before.samples;
      return k == 0 ? 0 : (resizeNanos - before.resizeNanos) / 1e6 / k;
    }
  }

  public Work work() {
    return new Work(assembled.get(), workNanos.get(), resizeNanos.get(), options.workers());
  }

  /** Starts epoch {@code epoch}; close it (or drain it) before starting the next one. */
  public Epoch epoch(int epoch) {
    return new Epoch(epoch, 0);
  }

  /**
   * Epoch {@code epoch} from batch {@code firstBatch} on: the same batches, with the same samples
   * and augmentation, as the whole epoch's from there (a run resumed from a checkpoint taken within
   * an epoch).
   */
  public Epoch epoch(int epoch, int firstBatch) {
    if (firstBatch < 0 || firstBatch > batchesPerEpoch()) {
      throw new IllegalArgumentException(
          "batch " + firstBatch + " outside an epoch of " + batchesPerEpoch());
    }
    return new Epoch(epoch, firstBatch);
  }

  /** The batches of one epoch, in order. */
  public final class Epoch implements AutoCloseable {
    private final int epoch;
    private final long[] order; // this rank's samples, in order
    private final List<CompletableFuture<Batch>> pending = new ArrayList<>();
    private int next;

    private Epoch(int epoch, int firstBatch) {
      this.epoch = epoch;
      this.order = rankOrder(epoch);
      this.next = firstBatch;
      // Batch b is assembled in slot b mod prefetch, as release() refills it.
      for (int slot = 0; slot < options.prefetch(); slot++) {
        pending.add(CompletableFuture.completedFuture(null));
      }
      for (int b = firstBatch;
          b < Math.min(firstBatch + options.prefetch(), batchesPerEpoch());
          b++) {
        pending.set(b % options.prefetch(), submit(b, b % options.prefetch()));
      }
    }

    /** The next batch, or null at the end of the epoch. */
    public Batch next() {
      if (next >= batchesPerEpoch()) {
        return null;
      }
      CompletableFuture<Batch> f = pending.get(next % options.prefetch());
      long start = System.nanoTime();
      Batch b = f.join();
      stallNanos.addAndGet(System.nanoTime() - start);
      next++;
      return b;
    }

    private CompletableFuture<Batch> submit(int batchIndex, int slot) {
      return CompletableFuture.supplyAsync(() -> assemble(batchIndex, slot), workers);
    }

    private Batch assemble(int batchIndex, int slot) {
      long start = System.nanoTime();
      Batch b = write(batchIndex, slot);
      workNanos.addAndGet(System.nanoTime() - start);
      assembled.addAndGet(b.size());
      return b;
    }

    /** Writes batch {@code batchIndex} into staging slot {@code slot}. */
    private Batch write(int batchIndex, int slot) {
      int size =
          (int)
              Math.min(options.batchSize(), order.length - (long) batchIndex * options.batchSize());
      HostBuffer pixels = pixelSlots.get(slot);
      HostBuffer labels = labelSlots.get(slot);
      IntBuffer labelInts = labels.asByteBuffer().asIntBuffer();
      long base = pixels.address();
      LoaderOptions.Augmentation augmentation = options.augmentation();
      CropResampler resizer = augmentation.resize() == null ? null : resamplers.get();
      for (int j = 0; j < size; j++) {
        long sample = order[batchIndex * options.batchSize() + j];
        ShardBatch source = batches[(int) (sample >>> 40)][(int) (sample >>> 20 & 0xFFFFF)];
        int row = (int) (sample & 0xFFFFF);
        SplittableRandom rng =
            new SplittableRandom(SampleIds.mix(options.sampling().seed(), epoch, source.id(row)));
        long target = base + (long) j * shape.bytes();
        if (resizer == null) {
          Augment.copy(
              source.imageAddress(row),
              target,
              shape,
              augmentation.cropPadding(),
              augmentation.flip(),
              rng);
        } else { // torchvision's order: the crop, then the flip
          long resizeStart = System.nanoTime();
          CropPlan plan =
              augmentation.resize().plan(stored.height(), stored.width(), rng::nextDouble);
          resizer.resample(
              source.imageAddress(row),
              stored,
              plan,
              shape,
              augmentation.flip() && rng.nextBoolean(),
              target);
          resizeNanos.addAndGet(System.nanoTime() - resizeStart);
        }
        labelInts.put(j, source.label(row));
      }
      return new Batch(batchIndex, size, pixels, labels, () -> release(batchIndex, slot));
    }

    private void release(int batchIndex, int slot) {
      int following = batchIndex + options.prefetch();
      if (following < batchesPerEpoch()) {
        pending.set(slot, submit(following, slot));
      }
    }

    @Override
    public void close() {
      pending.forEach(CompletableFuture::join); // no worker writes a slot after the epoch ends
    }
  }

  /**
   * This rank's samples for an epoch: a seeded shuffle, then its slice of every global batch of the
   * shared order (every worldSize-th sample when keeping the remainder) or the first of its own,
   * remainder applied.
   */
  private long[] rankOrder(int epoch) {
    LoaderOptions.Rank rank = options.rank();
    long[] all = index.clone();
    if (options.sampling().shuffle()) {
      // Ranks with shards of their own each draw an order of their own; shared shards, one order.
      long stream = rank.ownShards() ? 0x5E1F + ((long) rank.rank() << 16) : 0x5E1F;
      SplittableRandom rng =
          new SplittableRandom(SampleIds.mix(options.sampling().seed(), epoch, stream));
      for (int i = all.length - 1; i > 0; i--) {
        int j = rng.nextInt(i + 1);
        long t = all[i];
        all[i] = all[j];
        all[j] = t;
      }
    }
    // Full batches for DROP and PAD (PAD wraps around the order); KEEP ends with a short batch.
    long count =
        options.sampling().remainder() == LoaderOptions.Remainder.KEEP
            ? perRank()
            : (long) batchesPerEpoch() * options.batchSize();
    long[] mine = new long[(int) count];
    for (int i = 0; i < count; i++) {
      mine[i] = all[(int) (position(i) % all.length)];
    }
    return mine;
  }

  /** Where this rank's {@code i}-th sample of an epoch stands in the epoch's order. */
  private long position(long i) {
    LoaderOptions.Rank rank = options.rank();
    int world = rank.worldSize();
    if (rank.ownShards()) {
      return i;
    }
    if (options.sampling().remainder() == LoaderOptions.Remainder.KEEP) {
      return i * world + rank.rank();
    }
    long b = options.batchSize();
    return (i / b) * b * world + rank.rank() * b + i % b;
  }

  @Override
  public void close() {
    workers.shutdownNow();
    releaseMemory();
  }

  private void releaseMemory() {
    for (ShardBatch[] perShard : batches) {
      for (ShardBatch b : perShard == null ? new ShardBatch[0] : perShard) {
        if (b != null) {
          b.close();
        }
      }
    }
    pixelSlots.forEach(HostBuffer::close);
    labelSlots.forEach(HostBuffer::close);
  }

  /** Random crop with zero padding and horizontal flip, fused into the one copy of the pixels. */
  static final class Augment {
    private Augment() {}

    static void copy(
        long src, long dst, ImageShape shape, int padding, boolean flip, SplittableRandom rng) {
      int h = shape.height();
      int w = shape.width();
      int c = shape.channels();
      int dy = padding > 0 ? rng.nextInt(2 * padding + 1) - padding : 0;
      int dx = padding > 0 ? rng.nextInt(2 * padding + 1) - padding : 0;
      boolean mirror = flip && rng.nextBoolean();
      if (dy == 0 && dx == 0 && !mirror) {
        MemoryUtil.copyMemory(src, dst, shape.bytes());
        return;
      }
      int rowBytes = w * c;
      for (int y = 0; y < h; y++) {
        long out = dst + (long) y * rowBytes;
        int sy = y + dy;
        if (sy < 0 || sy >= h) {
          MemoryUtil.setMemory(out, rowBytes, (byte) 0);
          continue;
        }
        long in = src + (long) sy * rowBytes;
        for (int x = 0; x < w; x++) {
          int sx = (mirror ? w - 1 - x : x) + dx;
          long o = out + (long) x * c;
          if (sx < 0 || sx >= w) {
            for (int k = 0; k < c; k++) {
              MemoryUtil.putByte(o + k, (byte) 0);
            }
          } else {
            for (int k = 0; k < c; k++) {
              MemoryUtil.putByte(o + k, MemoryUtil.getByte(in + (long) sx * c + k));
            }
          }
        }
      }
    }
  }
}
