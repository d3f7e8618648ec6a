package dev.ramtrain.trainer.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The committed fatbin is built from the committed kernel sources: the digest build-fatbin.sh
 * recorded beside it must be the sources' digest now (sources-digest.sh's recipe), and it must
 * carry every kernel the backend launches and SASS for every target.
 */
class KernelSourcesTest {
  /** Surefire runs in the module's folder. */
  private static final Path SOURCES = Path.of("src/main/cuda");

  @Test
  void theFatbinWasBuiltFromTheseSources() throws Exception {
    String recorded;
    try (InputStream in = CudaKernels.class.getResourceAsStream("kernels.sources.sha256")) {
      recorded = new String(in.readAllBytes(), StandardCharsets.UTF_8).strip();
    }
    assertEquals(
        recorded,
        digest(),
        "trainer/src/main/cuda changed since kernels.fatbin was built: run bash"
            + " trainer/src/main/cuda/build-fatbin.sh and commit the fatbin");
  }

  @Test
  void theFatbinHasEveryKernelForEveryTarget() {
    String image = new String(CudaKernels.fatbin(), StandardCharsets.ISO_8859_1);
    for (Kernel kernel : Kernel.values()) {
      assertTrue(image.contains(kernel.symbol), "kernels.fatbin lacks " + kernel.symbol);
    }
    for (String target : List.of("sm_75", "sm_80", "sm_86", "sm_89", "sm_90")) {
      assertTrue(image.contains(target), "kernels.fatbin has no code for " + target);
    }
  }

  /** sha256 over "name\n" + sha256(content) + "\n" of every .cu and .cuh, in name order. */
  private static String digest() throws IOException, NoSuchAlgorithmException {
    List<Path> files;
    try (Stream<Path> listing = Files.list(SOURCES)) {
      files =
          listing
              .filter(p -> p.toString().endsWith(".cu") || p.toString().endsWith(".cuh"))
              .sorted()
              .toList();
    }
    StringBuilder lines = new StringBuilder();
    for (Path file : files) {
      lines
          .append(file.getFileName())
          .append('\n')
          .append(sha256(Files.readAllBytes(file)))
          .append('\n');
    }
    return sha256(lines.toString().getBytes(StandardCharsets.UTF_8));
  }

  private static String sha256(byte[] bytes) throws NoSuchAlgorithmException {
    return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(bytes));
  }
}
