package dev.ramtrain.bench;

import dev.ramtrain.etl.image.CropResize;
import dev.ramtrain.etl.image.JpegRowDecoder;
import dev.ramtrain.etl.image.Region;
import dev.ramtrain.format.ImageShape;
import dev.ramtrain.format.Manifest;
import dev.ramtrain.format.ManifestCodec;
import dev.ramtrain.format.ShardReader;
import dev.ramtrain.format.ShardSchema;
import dev.ramtrain.format.ShardWriter;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import dev.ramtrain.trainer.data.AntialiasedResize;
import dev.ramtrain.trainer.data.BadSamples;
import dev.ramtrain.trainer.data.Batch;
import dev.ramtrain.trainer.data.CropPlan;
import dev.ramtrain.trainer.data.CropResampler;
import dev.ramtrain.trainer.data.DataLoader;
import dev.ramtrain.trainer.data.LoaderSpec;
import dev.ramtrain.trainer.data.RandomResizedCrop;
import dev.ramtrain.trainer.data.ShardSet;
import dev.ramtrain.trainer.data.ShardSource;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.function.Supplier;

/**
 * The loader alone: N stored SIZE² RGB images in shards of 1,000 (pixels (x*3 + y*5 + c*7 + i*11)
 * mod 256, as benchmarks/loader_torch.py holds them), read by the trainer's DataLoader with a
 * random resized crop to OUT² and flips into pinned staging, batches released as soon as they come:
 * images/s of each epoch after the first. Prints one JSON line. Where DIR is a dataset (it has a
 * manifest.json), its train split is read instead, N and SIZE taken from it: a JPEG-column
 * dataset's rows are decoded as the jobs decode them (etl's JpegRowDecoder, libjpeg-turbo), only
 * each crop's region, at a DCT scale where the crop allows. WINDOW &gt; 0 reads a dataset's shards
 * that many at a time (ramtrain.train.shard-window) instead of mapping them all.
 *
 * <p>Usage: LoaderBench DIR N SIZE OUT BATCH WORKERS EPOCHS preprocessing|pillow [WINDOW]
 */
public final class LoaderBench {
  public static void main(String[] args) throws Exception {
    Path dir = Path.of(args[0]);
    int n = Integer.parseInt(args[1]);
    int size = Integer.parseInt(args[2]);
    int out = Integer.parseInt(args[3]);
    int batch = Integer.parseInt(args[4]);
    int workers = Integer.parseInt(args[5]);
    int epochs = Integer.parseInt(args[6]);
    boolean pillow = args[7].equals("pillow");
    int window = args.length > 8 ? Integer.parseInt(args[8]) : 0;
    if (!pillow) {
      CropResize.preload();
    }
    Supplier<CropResampler> resamplers =
        pillow ? AntialiasedResize::new : () -> LoaderBench::preprocessingFilter;
    Path manifestFile = dir.resolve("manifest.json");
    Manifest manifest =
        Files.exists(manifestFile)
            ? ManifestCodec.fromJson(Files.readAllBytes(manifestFile), manifestFile.toString())
            : null;
    ImageShape shape = manifest != null ? manifest.image().shape() : new ImageShape(size, size, 3);
    List<Path> files = new ArrayList<>();
    if (manifest == null) {
      files = write(dir, n, shape);
    } else {
      for (Manifest.Shard shard : manifest.split(Manifest.TRAIN).shards()) {
        files.add(dir.resolve(shard.file()));
      }
      n = (int) manifest.split(Manifest.TRAIN).rows();
      size = shape.height();
    }
    List<ShardReader> readers = new ArrayList<>();
    for (Path f : files) {
      readers.add(ShardReader.open(f, null));
    }
    String store = manifest == null ? "raw" : manifest.image().store();
    LoaderSpec options =
        LoaderSpec.training(
            batch,
            workers,
            4,
            1,
            LoaderSpec.Remainder.DROP,
            new LoaderSpec.SampleAugmentation(
                0, true, RandomResizedCrop.torchvisionDefaults(out, out)));
    List<Double> rates = new ArrayList<>();
    DataLoader.Work[] work = new DataLoader.Work[2];
    try (Backend backend = new CpuBackend(1);
        ShardSet shards =
            window > 0
                ? ShardSet.windowed(new ShardFiles(manifest, files), window)
                : new ShardSet(
                    shape, manifest == null ? List.of("c") : manifest.classes(), readers);
        DataLoader loader =
            new DataLoader(
                backend, shards, options, resamplers, LoaderBench::decodeJpeg, BadSamples.FAIL)) {
      for (int epoch = 0; epoch < epochs; epoch++) {
        if (epoch == 1) {
          work[0] = loader.work();
        }
        long start = System.nanoTime();
        long seen = 0;
        try (DataLoader.Epoch e = loader.epoch(epoch)) {
          Batch b;
          while ((b = e.next()) != null) {
            seen += b.size();
            b.release();
          }
        }
        rates.add(seen / ((System.nanoTime() - start) / 1e9));
      }
      work[1] = loader.work();
    }
    System.out.printf(
        Locale.ROOT,
        "{\"loader\": \"ramtrain\", \"store\": \"%s\", \"window\": %d, \"filter\": \"%s\","
            + " \"images\": %d,"
            + " \"stored\": %d, \"out\": %d, \"batch\": %d, \"workers\": %d,"
            + " \"decode_ms\": %.3f, \"crop_ms\": %.3f, \"images_per_s\": %s}%n",
        store,
        window,
        args[7],
        n,
        size,
        out,
        batch,
        workers,
        work[1].decodeMillisPerSampleSince(work[0]),
        work[1].resizeMillisPerSampleSince(work[0]),
        rates.subList(1, rates.size()).stream()
            .map(r -> String.format(Locale.ROOT, "%.1f", r))
            .toList());
  }

  /** A dataset's shard files read with plain reads, checksummed: jobs' DatasetShards, locally. */
  private record ShardFiles(Manifest manifest, List<Path> files) implements ShardSource {
    @Override
    public ShardSchema schema() {
      return manifest.shardSchema();
    }

    @Override
    public int count() {
      return files.size();
    }

    @Override
    public long rows(int shard) {
      return manifest.split(Manifest.TRAIN).shards().get(shard).rows();
    }

    @Override
    public long bytes(int shard) {
      return manifest.split(Manifest.TRAIN).shards().get(shard).bytes();
    }

    @Override
    public String name(int shard) {
      return files.get(shard).toString();
    }

    @Override
    public ShardReader read(int shard, ByteBuffer into) throws IOException {
      try (FileChannel in = FileChannel.open(files.get(shard))) {
        ByteBuffer target = into.duplicate().limit((int) bytes(shard));
        while (target.hasRemaining() && in.read(target) >= 0) {}
        return ShardReader.open(
            name(shard),
            target.flip(),
            manifest.split(Manifest.TRAIN).shards().get(shard).crc32cValue());
      }
    }
  }

  /** jobs' LibjpegRows (benchmarks do not depend on jobs and Spark). */
  private static String decodeJpeg(
      long jpeg,
      int length,
      ImageShape stored,
      int reduce,
      int x,
      int y,
      int width,
      int height,
      long target) {
    return JpegRowDecoder.decode(
        jpeg, length, stored, reduce, new Region(x, y, width, height), target);
  }

  /** jobs' ResizeFilter.PREPROCESSING (benchmarks do not depend on jobs and Spark). */
  private static void preprocessingFilter(
      long image, ImageShape stored, CropPlan plan, ImageShape out, boolean mirror, long target) {
    Region crop = new Region(plan.left(), plan.top(), plan.width(), plan.height());
    Region window = new Region(plan.windowLeft(), plan.windowTop(), out.width(), out.height());
    CropResize.into(
        image,
        stored.height(),
        stored.width(),
        stored.channels(),
        crop,
        plan.resizedHeight(),
        plan.resizedWidth(),
        window,
        mirror,
        target);
  }

  private static List<Path> write(Path dir, int n, ImageShape shape) throws Exception {
    Files.createDirectories(dir);
    ShardSchema schema = new ShardSchema(shape, List.of("c"));
    List<Path> files = new ArrayList<>();
    byte[] pixels = new byte[shape.bytes()];
    for (int first = 0; first < n; first += 1000) {
      Path file = dir.resolve(String.format(Locale.ROOT, "shard-%05d.arrow", first / 1000));
      try (OutputStream os = Files.newOutputStream(file);
          ShardWriter w = new ShardWriter(schema, os, 64L << 20)) {
        for (int i = first; i < Math.min(n, first + 1000); i++) {
          for (int y = 0; y < shape.height(); y++) {
            for (int x = 0; x < shape.width(); x++) {
              for (int c = 0; c < 3; c++) {
                pixels[(y * shape.width() + x) * 3 + c] =
                    (byte) ((x * 3 + y * 5 + c * 7 + i * 11) % 256);
              }
            }
          }
          w.append(i, 0, pixels);
        }
        w.finish();
      }
      files.add(file);
    }
    return files;
  }
}
