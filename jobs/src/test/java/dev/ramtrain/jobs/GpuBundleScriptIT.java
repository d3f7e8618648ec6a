package dev.ramtrain.jobs;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * benchmarks/gpu/bundle.sh replaces its output folder only when its own marker is in it: a folder
 * or file it did not make is refused, before any build, and left exactly as it was.
 */
class GpuBundleScriptIT {
  private static final Path ROOT = Path.of(System.getProperty("ramtrain.repo.root"));
  @TempDir Path tmp;

  private static String run(Path out, int expectedStatus) throws Exception {
    Process p =
        new ProcessBuilder(
                "bash", ROOT.resolve("benchmarks/gpu/bundle.sh").toString(), out.toString())
            .redirectErrorStream(true)
            .start();
    String output = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(p.waitFor(60, TimeUnit.SECONDS), "bundle.sh finished");
    assertEquals(expectedStatus, p.exitValue(), output);
    return output;
  }

  @Test
  void aFolderItDidNotMakeIsRefusedAndLeftAlone() throws Exception {
    Path out = tmp.resolve("photos");
    Files.createDirectories(out.resolve("2024"));
    byte[] mine = "a user's file".getBytes(StandardCharsets.UTF_8);
    Files.write(out.resolve("2024/holiday.jpg"), mine);
    String output = run(out, 1);
    assertTrue(output.contains("was not made by this script"), output);
    assertArrayEquals(mine, Files.readAllBytes(out.resolve("2024/holiday.jpg")));
    try (var entries = Files.list(out)) {
      assertEquals(1, entries.count(), "nothing added or removed");
    }
  }

  @Test
  void aFileInThePlaceIsRefusedAndLeftAlone() throws Exception {
    Path out = tmp.resolve("notes.txt");
    Files.writeString(out, "keep me");
    run(out, 1);
    assertEquals("keep me", Files.readString(out));
  }
}
