package dev.ramtrain.bench;

import static org.bytedeco.opencv.global.opencv_core.CV_8UC1;
import static org.bytedeco.opencv.global.opencv_imgcodecs.IMREAD_COLOR_RGB;
import static org.bytedeco.opencv.global.opencv_imgcodecs.imdecode;

import dev.ramtrain.etl.image.Augmentation;
import dev.ramtrain.etl.image.ImageDecoder;
import dev.ramtrain.etl.image.ImageProcessor;
import dev.ramtrain.etl.image.ImageTransform;
import dev.ramtrain.etl.image.ResizeMode;
import dev.ramtrain.etl.source.RawSample;
import dev.ramtrain.format.ImageShape;
import java.io.ByteArrayInputStream;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import javax.imageio.ImageIO;
import org.apache.arrow.memory.util.MemoryUtil;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.opencv.global.opencv_core;
import org.bytedeco.opencv.opencv_core.Mat;

/**
 * Images per second on one thread for the ETL's per-image work, on the JPEGs of
 * ../shared/anchors/make_jpegs.py, all read into memory first (as the anchor does). Run it pinned
 * to one core (taskset -c 0) to compare with torch_loader_bench.py. Prints one JSON line per
 * variant.
 *
 * <p>Usage: DecodeBench JPEG_ROOT [reps]
 */
public final class DecodeBench {
  private interface Work {
    void run(byte[] jpeg, long id) throws Exception;
  }

  public static void main(String[] args) throws Exception {
    Path root = Path.of(args[0]);
    int reps = args.length > 1 ? Integer.parseInt(args[1]) : 3;
    opencv_core.setNumThreads(1); // one core, like the anchor
    List<byte[]> files = new ArrayList<>();
    try (var walk = Files.walk(root)) {
      for (Path p : walk.filter(f -> f.toString().endsWith(".jpg")).sorted().toList()) {
        files.add(Files.readAllBytes(p));
      }
    }
    ByteBuffer staging = ByteBuffer.allocateDirect(224 * 224 * 3);
    long stagingAddress = MemoryUtil.getByteBufferAddress(staging);
    ImageProcessor.Sink toStaging =
        (copy, pixels) -> MemoryUtil.copyMemory(pixels, stagingAddress, 1); // touch

    measure("imageio_decode", files, reps, (b, id) -> ImageIO.read(new ByteArrayInputStream(b)));
    measure(
        "opencv_decode",
        files,
        reps,
        (b, id) -> {
          try (BytePointer data = new BytePointer(b);
              Mat enc = new Mat(1, b.length, CV_8UC1, data);
              Mat img = imdecode(enc, IMREAD_COLOR_RGB)) {
            if (img.empty()) {
              throw new IllegalStateException("decode failed");
            }
          }
        });
    // torchvision's pipeline minus ToTensor/Normalize (ramtrain normalizes on the device):
    // decode, RandomResizedCrop(224), RandomHorizontalFlip, to RGB uint8 HWC.
    Augmentation rrcFlip = new Augmentation(1, false, 0.08, 1.0, 3.0 / 4, 4.0 / 3, 0.5, 0, 0, 0, 0);
    ImageProcessor.Sink sink =
        (copy, pixels) -> MemoryUtil.copyMemory(pixels, stagingAddress, 224 * 224 * 3);
    for (ImageDecoder.Kind kind : ImageDecoder.Kind.values()) {
      // OpenCV twice: decoding only the crop's region of each JPEG (the default), and whole.
      for (boolean regions :
          kind == ImageDecoder.Kind.OPENCV ? new boolean[] {true, false} : new boolean[] {false}) {
        ImageProcessor p =
            new ImageProcessor(
                new ImageTransform(
                    new ImageShape(224, 224, 3), ResizeMode.SHORTER_SIDE_CROP, rrcFlip),
                kind,
                1L << 28,
                1,
                regions);
        measure(
            "pipeline_rrc224_flip_"
                + kind.name().toLowerCase()
                + (regions || kind != ImageDecoder.Kind.OPENCV ? "" : "_whole_jpeg"),
            files,
            reps,
            (b, id) -> p.process(RawSample.encoded("k", b, 0, null), id, sink));
      }
    }
    // The usual offline ETL steps: shorter side to 64 or 224 + centre crop, the per-core rates the
    // end-to-end job is measured against. OpenCV decodes these JPEGs at 1/2 size in the DCT for 64;
    // ImageIO has no such mode and decodes them whole (measured at 64 only).
    for (int side : new int[] {64, 224}) {
      for (ImageDecoder.Kind kind : ImageDecoder.Kind.values()) {
        if (side != 64 && kind != ImageDecoder.Kind.OPENCV) {
          continue;
        }
        for (boolean regions : regionChoices(kind)) {
          ImageProcessor resized =
              new ImageProcessor(
                  new ImageTransform(
                      new ImageShape(side, side, 3),
                      ResizeMode.SHORTER_SIDE_CROP,
                      Augmentation.NONE),
                  kind,
                  1L << 28,
                  1,
                  regions);
          measure(
              "resize" + side + "_" + variant(kind, regions),
              files,
              reps,
              (b, id) -> resized.process(RawSample.encoded("k", b, 0, null), id, toStaging));
        }
      }
    }
  }

  /**
   * OpenCV twice: decoding only the region of each JPEG the output shows (the default), and whole.
   */
  private static boolean[] regionChoices(ImageDecoder.Kind kind) {
    return kind == ImageDecoder.Kind.OPENCV ? new boolean[] {true, false} : new boolean[] {false};
  }

  private static String variant(ImageDecoder.Kind kind, boolean regions) {
    String name = kind.name().toLowerCase();
    return kind == ImageDecoder.Kind.OPENCV && !regions ? name + "_whole_jpeg" : name;
  }

  private static void measure(String name, List<byte[]> files, int reps, Work work)
      throws Exception {
    pass(files, work); // warm-up: JIT, native libraries; two passes, or the first variant runs cold
    pass(files, work);
    double[] rates = new double[reps];
    for (int r = 0; r < reps; r++) {
      rates[r] = files.size() / pass(files, work);
    }
    double[] sorted = rates.clone();
    Arrays.sort(sorted);
    StringBuilder list = new StringBuilder();
    for (double rate : rates) {
      list.append(list.length() == 0 ? "" : ", ").append(String.format("%.1f", rate));
    }
    System.out.printf(
        "{\"variant\": \"%s\", \"images\": %d, \"rates\": [%s], \"median_images_per_s\": %.1f}%n",
        name, files.size(), list, sorted[reps / 2]);
  }

  private static double pass(List<byte[]> files, Work work) throws Exception {
    long start = System.nanoTime();
    for (int i = 0; i < files.size(); i++) {
      work.run(files.get(i), i);
    }
    return (System.nanoTime() - start) / 1e9;
  }
}
