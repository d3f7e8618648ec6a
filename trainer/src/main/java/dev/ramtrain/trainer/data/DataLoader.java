package dev.ramtrain.trainer.data;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.format.ShardBatch;
import dev.ramtrain.format.ShardReader;
import dev.ramtrain.random.Seeds;
import dev.ramtrain.threads.Uninterruptibly;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.HostBuffer;
import java.nio.IntBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import org.apache.arrow.memory.util.MemoryUtil;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Streams batches from memory-mapped shards into pinned staging buffers. Each epoch shuffles all
 * samples with a generator seeded by (seed, epoch) and gives this rank its slice of every global
 * batch (or, where each rank has shards of its own, shuffles those by (seed, epoch, rank)); worker
 * threads assemble batches, writing each image once, from the shard into staging, with its random
 * crop (padded, or resized: {@link InputResize}, by a {@link CropResampler}) and flip drawn from
 * (seed, epoch, sample id). So what a batch holds never depends on thread timing, and batches come
 * out in order whatever order the workers finish in. A JPEG row of an encoded shard is decoded by a
 * {@link JpegDecoder} into the slot's scratch first, only the region its crop needs, at the
 * smallest DCT scale that still covers the output, and then resampled like a stored image; one that
 * does not decode fails the epoch or is replaced ({@link BadSamples}).
 */
public final class DataLoader implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(DataLoader.class);
  // What the console need not show, in the log file (conf/log4j2.properties)
  private static final Logger FAILURE = LoggerFactory.getLogger("dev.ramtrain.failure");
  private final LoaderSpec options;
  private final ImageShape stored; // the shards' images
  private final ImageShape shape; // the batches' images: stored, or resized
  private final long[] shardRows;
  private final long samples;
  private final LoadedShard[] opened; // every shard, opened once; null when read by windows
  private final ShardWindows windows; // null when every shard is opened
  private final int windowShards;
  private final ExecutorService workers;
  private final List<HostBuffer> pixelSlots = new ArrayList<>();
  private final List<HostBuffer> labelSlots = new ArrayList<>();
  private final AtomicLong stallNanos = new AtomicLong();
  private final AtomicLong workNanos = new AtomicLong(); // the workers' time assembling batches
  private final AtomicLong resizeNanos = new AtomicLong(); // of it, resizing crops
  private final AtomicLong decodeNanos = new AtomicLong(); // of it, decoding JPEG rows
  private final AtomicLong assembled = new AtomicLong(); // samples the workers have written
  private final AtomicLong replaced = new AtomicLong(); // samples that did not decode, skipped
  private final Set<Long> warned = ConcurrentHashMap.newKeySet(); // bad samples already logged
  private final Supplier<? extends CropResampler> resamplers;
  private final JpegDecoder jpeg; // null: the shards hold no JPEG rows
  private final BadSamples badSamples;
  private final List<JpegScratch> decodeSlots = new ArrayList<>(); // per staging slot

  public DataLoader(Backend backend, ShardSet shards, LoaderSpec options) {
    this(backend, shards, options, AntialiasedResize::new);
  }

  /**
   * A loader resizing crops ({@link LoaderSpec.SampleAugmentation#resize}) with the resamplers
   * {@code resamplers} makes, one per batch being assembled.
   */
  public DataLoader(
      Backend backend,
      ShardSet shards,
      LoaderSpec options,
      Supplier<? extends CropResampler> resamplers) {
    this(backend, shards, options, resamplers, null, BadSamples.FAIL);
  }

  /**
   * A loader that also decodes the JPEG rows of encoded shards with {@code jpeg} (null where no
   * shard is encoded), dealing with those that do not decode as {@code badSamples} says. Opened
   * shards are read where they lie; a {@linkplain ShardSet#windowed windowed} set's a window at a
   * time ({@link WindowedOrder}, {@link ShardWindows}), in two windows of memory at most ({@link
   * #shardMemoryBytes}) however many shards there are.
   */
  public DataLoader(
      Backend backend,
      ShardSet shards,
      LoaderSpec options,
      Supplier<? extends CropResampler> resamplers,
      JpegDecoder jpeg,
      BadSamples badSamples) {
    this(
        backend,
        shards.shape(),
        shards.windowed()
            ? shards.source().schema().encoded()
            : shards.readers().stream().anyMatch(r -> r.schema().encoded()),
        shards.windowed() ? rowsOf(shards.source()) : rowsOf(shards),
        shards.windowed() ? null : shards,
        shards.source(),
        shards.windowShards(),
        options,
        resamplers,
        jpeg,
        badSamples);
  }

  private DataLoader(
      Backend backend,
      ImageShape stored,
      boolean encoded,
      long[] shardRows,
      ShardSet openShards,
      ShardSource source,
      int windowShards,
      LoaderSpec options,
      Supplier<? extends CropResampler> resamplers,
      JpegDecoder jpeg,
      BadSamples badSamples) {
    if (encoded && jpeg == null) {
      throw new IllegalArgumentException(
          firstEncoded(openShards, source)
              + " holds JPEG rows and this loader was given no JPEG"
              + " decoder");
    }
    this.resamplers = resamplers;
    this.jpeg = jpeg;
    this.badSamples = badSamples;
    this.options = options;
    this.stored = stored;
    this.shape = options.inputShape(stored);
    this.shardRows = shardRows;
    this.samples = java.util.Arrays.stream(shardRows).sum();
    this.windowShards = windowShards;
    this.opened = openShards == null ? null : new LoadedShard[shardRows.length];
    ShardWindows reading = null;
    try {
      if (openShards != null) {
        for (int s = 0; s < opened.length; s++) {
          opened[s] = new LoadedShard(openShards.readers().get(s), false); // the set's readers
        }
      } else {
        reading = new ShardWindows(source, windowShards, residentWindows(shardRows));
      }
      requireSamples();
      for (int i = 0; i < options.prefetch(); i++) {
        pixelSlots.add(
            backend.allocateHost("loader.pixels." + i, (long) options.batchSize() * shape.bytes()));
        labelSlots.add(backend.allocateHost("loader.labels." + i, 4L * options.batchSize()));
        if (jpeg != null) { // a decoded image waits here for its crop: never sent to the device
          decodeSlots.add(new JpegScratch(stored.bytes()));
        }
      }
    } catch (RuntimeException | Error e) {
      if (reading != null) {
        reading.close();
      }
      releaseMemory(); // nobody else can: the constructor does not return
      throw e;
    }
    this.windows = reading;
    this.workers =
        Executors.newFixedThreadPool(
            options.workers(),
            r -> {
              Thread t = new Thread(r, "ramtrain-loader");
              t.setDaemon(true);
              // A mapped file's fault can surface after its batch, inside the pool's own code: the
              // batch has failed naming the file already, and the trace goes to the log only.
              t.setUncaughtExceptionHandler(
                  (thread, e) -> FAILURE.error("loader thread {} ended", thread.getName(), e));
              return t;
            });
  }

  /**
   * How many windows must be held at once for no batch to wait on one that cannot be read: two (the
   * one written from and the next, read ahead), or as many as a batch's samples can span where
   * windows hold fewer samples than a batch (a batch covers {@code batch × ranks} positions of a
   * shared order; a full window holds at least its {@code windowShards} smallest shards' rows, the
   * last, partial one may hold less).
   */
  private int residentWindows(long[] rows) {
    long[] sorted = rows.clone();
    java.util.Arrays.sort(sorted);
    long fullWindow = 0;
    for (int i = 0; i < Math.min(windowShards, sorted.length); i++) {
      fullWindow += sorted[i];
    }
    LoaderSpec.Rank rank = options.rank();
    long positions = (long) options.batchSize() * (rank.ownShards() ? 1 : rank.worldSize());
    long span = 1 + (positions - 1 + Math.max(1, fullWindow) - 1) / Math.max(1, fullWindow);
    boolean partial = rows.length > windowShards && rows.length % windowShards != 0;
    return (int) Math.max(2, span + (partial ? 1 : 0));
  }

  private static long[] rowsOf(ShardSet shards) {
    return shards.readers().stream().mapToLong(ShardReader::rowCount).toArray();
  }

  private static long[] rowsOf(ShardSource source) {
    long[] rows = new long[source.count()];
    java.util.Arrays.setAll(rows, source::rows);
    return rows;
  }

  private static String firstEncoded(ShardSet shards, ShardSource source) {
    if (source != null) {
      return source.count() == 0 ? "the source" : source.name(0);
    }
    return shards.readers().stream()
        .filter(r -> r.schema().encoded())
        .map(ShardReader::name)
        .findFirst()
        .orElse("a shard");
  }

  /**
   * The memory the shards take while this loader reads them: every shard's bytes when all are open
   * (mapped: the page cache must hold them for epochs not to read the disk again), two windows'
   * when read by windows (memory the loader owns).
   */
  public long shardMemoryBytes() {
    if (windows != null) {
      return windows.budgetBytes();
    }
    long bytes = 0;
    for (LoadedShard s : opened) {
      bytes += s.bytes();
    }
    return bytes;
  }

  /** The most memory windows of shards have taken at once (0 when every shard is open). */
  public long peakWindowBytes() {
    return windows == null ? 0 : windows.peakResidentBytes();
  }

  private void requireSamples() {
    boolean evaluatesOwnShards =
        options.rank().ownShards() && options.sampling().remainder() == LoaderSpec.Remainder.KEEP;
    if (!evaluatesOwnShards && samples == 0) {
      throw new IllegalArgumentException(
          "no samples for rank " + options.rank().rank() + " of " + options.rank().worldSize());
    }
    if (options.rank().ownShards()
        && options.sampling().remainder() == LoaderSpec.Remainder.DROP
        && options.rank().ownShare() > samples) {
      throw new IllegalArgumentException(
          String.format(
              "rank %d holds %d samples and was asked for %d per epoch without padding",
              options.rank().rank(), samples, options.rank().ownShare()));
    }
  }

  /** The shape of the images in this loader's batches: the stored one, or the resize's. */
  public ImageShape shape() {
    return shape;
  }

  public long samples() {
    return samples;
  }

  /**
   * Samples this rank sees per epoch: DROP and PAD in whole steps (a batch on every rank, times the
   * batches accumulated into a step), the last one dropped or filled by wrapping around; KEEP every
   * sample once over the ranks.
   */
  long perRank() {
    LoaderSpec.Rank rank = options.rank();
    int world = rank.worldSize();
    LoaderSpec.Remainder remainder = options.sampling().remainder();
    long stepOfRank = (long) options.batchSize() * options.batchesPerStep();
    if (rank.ownShards()) {
      return remainder == LoaderSpec.Remainder.KEEP
          ? samples
          : wholeSteps(rank.ownShare(), stepOfRank, remainder) * stepOfRank;
    }
    return switch (remainder) {
      case PAD, DROP -> wholeSteps(samples, stepOfRank * world, remainder) * stepOfRank;
      // Positions rank, rank + world, ... below the sample count: every sample on one rank.
      case KEEP -> (samples - rank.rank() + world - 1) / world;
    };
  }

  private static long wholeSteps(long samples, long step, LoaderSpec.Remainder remainder) {
    return remainder == LoaderSpec.Remainder.PAD ? (samples + step - 1) / step : samples / step;
  }

  /** Batches per optimizer step: the unit of the remainder rule. */
  public int batchesPerStep() {
    return options.batchesPerStep();
  }

  /** Whether every rank of the loader's world gets the same number of batches, full ones. */
  public boolean sameBatchesOnEveryRank() {
    return options.sampling().remainder() != LoaderSpec.Remainder.KEEP;
  }

  public int batchesPerEpoch() {
    long b = options.batchSize();
    return (int)
        (options.sampling().remainder() == LoaderSpec.Remainder.DROP
            ? perRank() / b
            : (perRank() + b - 1) / b);
  }

  /**
   * The samples of batch {@code index} of every epoch: the batch size, but for the last batch under
   * KEEP, which holds what is left (gradient accumulation weighs its micro-batches by it).
   */
  public int batchSize(int index) {
    long count =
        options.sampling().remainder() == LoaderSpec.Remainder.KEEP
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
  public record Work(
      long samples, long nanos, long resizeNanos, long decodeNanos, long replaced, int workers) {
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

    /** Milliseconds of JPEG decoding a sample took on average between {@code before} and this. */
    public double decodeMillisPerSampleSince(Work before) {
      long k = samples - before.samples;
      return k == 0 ? 0 : (decodeNanos - before.decodeNanos) / 1e6 / k;
    }
  }

  public Work work() {
    return new Work(
        assembled.get(),
        workNanos.get(),
        resizeNanos.get(),
        decodeNanos.get(),
        replaced.get(),
        options.workers());
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
    private final long[] order; // this rank's samples, in order: shard << 32 | row
    private final int[] windowOf; // the window each sample is read in; null: every shard open
    private final ShardWindows.Pass pass; // null: every shard open
    private int[] batchesUsing; // per window read, the batches still to write that draw on it
    private final List<CompletableFuture<Batch>> pending = new ArrayList<>();
    private int next;

    private Epoch(int epoch, int firstBatch) {
      this.epoch = epoch;
      this.next = firstBatch;
      if (windows == null) {
        this.order = rankSamples(shuffledIndex(epoch));
        this.windowOf = null;
        this.pass = null;
      } else {
        WindowedOrder drawn =
            WindowedOrder.draw(
                shardRows,
                windowShards,
                options.sampling().shuffle(),
                options.sampling().seed(),
                epoch,
                orderStream());
        this.order = rankSamples(drawn.samples());
        this.windowOf = new int[order.length];
        this.pass = windows.start(windowsRead(drawn, firstBatch), batchesUsing);
      }
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

    /**
     * The windows this rank reads its samples in, in order: a window of the order each time the
     * rank's samples enter it (an epoch padded by wrapping around enters the first ones again).
     * Fills {@link #windowOf} and, for batches from {@code firstBatch} on, {@link #batchesUsing}; a
     * batch may draw on two windows (the end of one and the start of the next), not more, as two
     * are all that are kept.
     */
    private int[][] windowsRead(WindowedOrder drawn, int firstBatch) {
      List<int[]> shards = new ArrayList<>();
      long n = drawn.samples().length;
      long entered = -1;
      for (int i = 0; i < order.length; i++) {
        long p = position(i);
        long window = (p / n) * drawn.windows() + drawn.windowAt(p % n);
        if (window != entered) {
          shards.add(drawn.windowShards()[(int) (window % drawn.windows())]);
          entered = window;
        }
        windowOf[i] = shards.size() - 1;
      }
      batchesUsing = new int[shards.size()];
      int size = options.batchSize();
      for (int b = firstBatch; b < batchesPerEpoch(); b++) {
        int first = windowOf[b * size];
        int last = windowOf[Math.min(order.length, (b + 1) * size) - 1];
        if (last - first >= windows.residentWindows()) { // residentWindows() bounds it
          throw new IllegalStateException(
              String.format(
                  "a batch of %d samples spans %d windows of %d shards, more than the %d kept",
                  size, last - first + 1, windowShards, windows.residentWindows()));
        }
        for (int w = first; w <= last; w++) {
          batchesUsing[w]++;
        }
      }
      return shards.toArray(int[][]::new);
    }

    /** The next batch, or null at the end of the epoch. */
    public Batch next() {
      if (next >= batchesPerEpoch()) {
        return null;
      }
      CompletableFuture<Batch> f = pending.get(next % options.prefetch());
      long start = System.nanoTime();
      Batch b;
      try {
        b = f.join();
      } catch (CompletionException e) {
        // A worker's failure (a sample that does not decode) is the caller's, in its own words.
        if (e.getCause() instanceof RuntimeException cause) {
          throw cause;
        }
        if (e.getCause() instanceof InternalError fault && opened != null) {
          // a mapped page's fault surfacing past the worker's own check: which file was cut
          requireUnchanged(Arrays.asList(opened), fault);
        }
        throw e;
      }
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
      CropResampler resizer = options.augmentation().resize() == null ? null : resamplers.get();
      JpegScratch scratch = jpeg == null ? null : decodeSlots.get(slot);
      int first = batchIndex * options.batchSize();
      Set<LoadedShard> touched = Collections.newSetFromMap(new IdentityHashMap<>());
      try {
        ShardWindows.Pass.Held held =
            pass == null ? null : pass.hold(windowOf[first], windowOf[first + size - 1]);
        for (int j = 0; j < size; j++) {
          long target = base + (long) j * shape.bytes();
          labelInts.put(j, writeSample(first + j, held, target, resizer, scratch, touched));
        }
      } catch (RuntimeException | InternalError e) {
        // a read of a mapped page the file no longer has faults, or gives garbage that fails
        requireUnchanged(touched, e);
        throw e;
      } finally {
        if (pass != null) { // its windows may go once every batch drawing on them is written
          pass.written(windowOf[first], windowOf[first + size - 1]);
        }
      }
      requireUnchanged(touched, null); // what a cut file's pages gave is garbage: never used
      return new Batch(batchIndex, size, pixels, labels, () -> release(batchIndex, slot));
    }

    /** Fails naming the first of {@code shards} whose file changed while it was read. */
    private static void requireUnchanged(Iterable<LoadedShard> shards, Throwable fault) {
      for (LoadedShard shard : shards) {
        String changed = shard.changedOnDisk();
        if (changed != null) {
          throw new ShardChangedException(shard.name() + ": " + changed, fault);
        }
      }
    }

    /**
     * Writes the input of the sample at {@code position} of the order at {@code target} (its shard
     * found among the batch's {@code held} windows, or the open shards), or, where its image does
     * not decode and bad samples are skipped, the next sample of its record batch that does;
     * returns the label of the sample written.
     */
    private int writeSample(
        int position,
        ShardWindows.Pass.Held held,
        long target,
        CropResampler resizer,
        JpegScratch scratch,
        Set<LoadedShard> touched) {
      long sample = order[position];
      int shard = (int) (sample >>> 32);
      long shardRow = sample & 0xFFFFFFFFL;
      LoadedShard loaded = held == null ? opened[shard] : held.shard(windowOf[position], shard);
      touched.add(loaded);
      int recordBatch = loaded.batchOf(shardRow);
      ShardBatch source = loaded.batch(recordBatch);
      int row = loaded.rowIn(recordBatch, shardRow);
      for (int tried = 0; tried < source.rowCount(); tried++) {
        int r = (row + tried) % source.rowCount();
        String why = writeImage(source, r, loaded.mapped(), target, resizer, scratch);
        if (why == null) {
          if (tried > 0) {
            replaced.incrementAndGet();
          }
          return source.label(r);
        }
        String message =
            String.format(
                "%s: sample %d (record batch %d, row %d) does not decode: %s",
                loaded.name(), source.id(r), recordBatch, r, why);
        if (badSamples == BadSamples.FAIL) {
          throw new BadSampleException(
              message + " (ramtrain.train.bad-sample=skip trains on without it)");
        }
        if (warned.add(source.id(r))) {
          LOG.warn("{}; skipped, the next sample of its record batch stands in", message);
        }
      }
      throw new BadSampleException(
          loaded.name() + ": no sample of record batch " + recordBatch + " decodes");
    }

    /**
     * Writes row {@code row}'s input at {@code target}: its crop (padded, or resized) and flip
     * drawn from (seed, epoch, sample id), its JPEG decoded first into {@code scratch}. Returns
     * null, or why its JPEG does not decode.
     */
    private String writeImage(
        ShardBatch source,
        int row,
        boolean mapped,
        long target,
        CropResampler resizer,
        JpegScratch scratch) {
      LoaderSpec.SampleAugmentation augmentation = options.augmentation();
      SplittableRandom rng =
          new SplittableRandom(Seeds.mix(options.sampling().seed(), epoch, source.id(row)));
      boolean isJpeg = source.isJpeg(row);
      long image = isJpeg ? scratch.decoded() : source.imageAddress(row);
      if (resizer == null) {
        if (isJpeg) {
          String why =
              decode(source, row, mapped, 1, 0, 0, stored.width(), stored.height(), scratch);
          if (why != null) {
            return why;
          }
        }
        Augment.copy(image, target, shape, augmentation.cropPadding(), augmentation.flip(), rng);
        return null;
      }
      // torchvision's order: the crop, then the flip
      CropPlan plan = augmentation.resize().plan(stored.height(), stored.width(), rng::nextDouble);
      boolean mirror = augmentation.flip() && rng.nextBoolean();
      ImageShape from = stored;
      if (isJpeg) {
        int reduce = reduction(plan);
        // The crop in the scaled image's pixels, rounded to whole ones (by at most half a pixel).
        int scaledWidth = (stored.width() + reduce - 1) / reduce;
        int scaledHeight = (stored.height() + reduce - 1) / reduce;
        int x0 = Math.min(scaledWidth - 1, Math.round((float) plan.left() / reduce));
        int y0 = Math.min(scaledHeight - 1, Math.round((float) plan.top() / reduce));
        int x1 =
            Math.max(
                x0 + 1,
                Math.min(scaledWidth, Math.round((float) (plan.left() + plan.width()) / reduce)));
        int y1 =
            Math.max(
                y0 + 1,
                Math.min(scaledHeight, Math.round((float) (plan.top() + plan.height()) / reduce)));
        String why = decode(source, row, mapped, reduce, x0, y0, x1 - x0, y1 - y0, scratch);
        if (why != null) {
          return why;
        }
        from = new ImageShape(y1 - y0, x1 - x0, stored.channels());
        plan =
            new CropPlan(
                0,
                0,
                from.height(),
                from.width(),
                plan.resizedHeight(),
                plan.resizedWidth(),
                plan.windowTop(),
                plan.windowLeft());
      }
      long resizeStart = System.nanoTime();
      resizer.resample(image, from, plan, shape, mirror, target);
      resizeNanos.addAndGet(System.nanoTime() - resizeStart);
      return null;
    }

    private String decode(
        ShardBatch source,
        int row,
        boolean mapped,
        int reduce,
        int x,
        int y,
        int width,
        int height,
        JpegScratch scratch) {
      long start = System.nanoTime();
      String why =
          jpeg.decode(
              scratch.input(source, row, mapped),
              source.imageLength(row),
              stored,
              reduce,
              x,
              y,
              width,
              height,
              scratch.decoded());
      decodeNanos.addAndGet(System.nanoTime() - start);
      return why;
    }

    private void release(int batchIndex, int slot) {
      int following = batchIndex + options.prefetch();
      if (following < batchesPerEpoch()) {
        pending.set(slot, submit(following, slot));
      }
    }

    @Override
    public void close() {
      if (pass != null) {
        pass.stop(); // a worker waiting for a window that will not come gives up
      }
      // No worker writes a slot after the epoch ends; a batch that failed told next() so.
      for (CompletableFuture<Batch> f : pending) {
        try {
          f.join();
        } catch (CompletionException e) {
          LOG.debug("a batch of the closed epoch failed", e);
        }
      }
      if (pass != null) {
        pass.close();
      }
    }
  }

  /**
   * The largest DCT scale-down (1/2, 1/4, 1/8, as far as the decoder goes) that leaves the crop at
   * least as many pixels on each axis as its resized output: decoding fewer would upsample what the
   * filter should downsample.
   */
  private int reduction(CropPlan plan) {
    for (int reduce = jpeg.largestReduce(); reduce > 1; reduce /= 2) {
      if (plan.width() >= (long) reduce * plan.resizedWidth()
          && plan.height() >= (long) reduce * plan.resizedHeight()) {
        return reduce;
      }
    }
    return 1;
  }

  /**
   * Every sample, shard by shard, shuffled with a generator seeded by (seed, epoch) when the
   * sampling shuffles: the order of a loader whose shards are all open.
   */
  private long[] shuffledIndex(int epoch) {
    long[] all = new long[Math.toIntExact(samples)];
    int at = 0;
    for (int shard = 0; shard < shardRows.length; shard++) {
      for (long row = 0; row < shardRows[shard]; row++) {
        all[at++] = (long) shard << 32 | row;
      }
    }
    if (options.sampling().shuffle()) {
      SplittableRandom rng =
          new SplittableRandom(Seeds.mix(options.sampling().seed(), epoch, orderStream()));
      for (int i = all.length - 1; i > 0; i--) {
        int j = rng.nextInt(i + 1);
        long t = all[i];
        all[i] = all[j];
        all[j] = t;
      }
    }
    return all;
  }

  /**
   * The stream the order is drawn from: ranks with shards of their own each draw an order of their
   * own; shared shards, one order.
   */
  private long orderStream() {
    LoaderSpec.Rank rank = options.rank();
    return rank.ownShards() ? 0x5E1F + ((long) rank.rank() << 16) : 0x5E1F;
  }

  /**
   * This rank's samples of an epoch whose order is {@code all}: its slice of every global batch of
   * the shared order (every worldSize-th sample when keeping the remainder) or the first of its
   * own, remainder applied: full batches for DROP and PAD (PAD wraps around the order), KEEP ends
   * with a short batch.
   */
  private long[] rankSamples(long[] all) {
    long count =
        options.sampling().remainder() == LoaderSpec.Remainder.KEEP
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
    LoaderSpec.Rank rank = options.rank();
    int world = rank.worldSize();
    if (rank.ownShards()) {
      return i;
    }
    if (options.sampling().remainder() == LoaderSpec.Remainder.KEEP) {
      return i * world + rank.rank();
    }
    long b = options.batchSize();
    return (i / b) * b * world + rank.rank() * b + i % b;
  }

  @Override
  public void close() {
    workers.shutdownNow();
    // A worker still assembling a batch writes a pixel slot and reads a window: both are freed
    // next.
    if (!Uninterruptibly.awaitTermination(workers, Duration.ofMinutes(1))) {
      LOG.warn("a loader worker did not stop within a minute; its memory is not freed");
      return;
    }
    if (windows != null) {
      windows.close();
    }
    releaseMemory();
  }

  private void releaseMemory() {
    if (opened != null) {
      for (LoadedShard shard : opened) {
        if (shard != null) {
          shard.close();
        }
      }
    }
    pixelSlots.forEach(HostBuffer::close);
    labelSlots.forEach(HostBuffer::close);
    decodeSlots.clear(); // plain direct buffers: freed once unreachable
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
