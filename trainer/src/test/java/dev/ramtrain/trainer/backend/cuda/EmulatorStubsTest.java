package dev.ramtrain.trainer.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.bytedeco.cuda.global.cublas;
import org.bytedeco.cuda.global.cudnn;
import org.bytedeco.javacpp.Loader;
import org.junit.jupiter.api.Test;

/**
 * The emulator's cuBLAS and cuDNN stubs export every function the engine binds, each under the
 * library and symbol version JavaCPP's wrapper imports it from: a function the stubs lack, or one
 * exported by the wrong library, loads fine and kills the JVM at its first call ("symbol lookup
 * error"), so CI would die instead of failing. The engine's functions are its static imports from
 * the presets (the only way the engine reaches them); the wrappers' imports and the stubs' exports
 * are read with binutils' nm, which the emulator's build needs anyway.
 */
class EmulatorStubsTest {
  private static final Path ENGINE = Path.of("src/main/java/dev/ramtrain/trainer/backend/cuda");
  private static final Pattern BOUND =
      Pattern.compile("import static org\\.bytedeco\\.cuda\\.global\\.(\\w+)\\.([a-z]\\w*);");

  @Test
  void theStubsExportEveryFunctionTheEngineBindsWhereTheWrappersLookForIt() throws Exception {
    Set<String> bound = boundFunctions();
    assertTrue(bound.contains("cudnnConvolutionForward"), "the scan finds the engine's imports");
    assertTrue(bound.contains("cublasGemmEx"), "the scan finds the engine's imports");

    Set<String> imported = new TreeSet<>(); // name@library, as the wrappers import them
    for (Class<?> preset : List.of(cublas.class, cudnn.class)) {
      imported.addAll(symbols("--undefined-only", Path.of(Loader.load(preset))));
    }
    Set<String> exported = new TreeSet<>();
    Path stubs = Path.of(System.getProperty("ramtrain.cuda.emulator.dir"));
    try (Stream<Path> files = Files.list(stubs)) {
      for (Path library : files.filter(f -> f.getFileName().toString().contains(".so.")).toList()) {
        exported.addAll(symbols("--defined-only", library));
      }
    }
    List<String> missing = new ArrayList<>();
    for (String function : bound) {
      List<String> wanted = imported.stream().filter(s -> s.startsWith(function + "@")).toList();
      assertEquals(1, wanted.size(), function + " is imported once by a wrapper: " + wanted);
      if (!exported.contains(wanted.get(0))) {
        missing.add(wanted.get(0));
      }
    }
    assertTrue(missing.isEmpty(), "the emulator's stubs lack " + missing);
  }

  @Test
  void aFunctionOutsideTheStubsIsNoticed() throws Exception {
    Set<String> imported = symbols("--undefined-only", Path.of(Loader.load(cudnn.class)));
    assertTrue(imported.contains("cudnnCTCLoss@libcudnn_adv.so.9"), "imports carry versions");
    Path stub = Path.of(System.getProperty("ramtrain.cuda.emulator.dir"), "libcudnn_adv.so.9");
    assertFalse(symbols("--defined-only", stub).contains("cudnnCTCLoss@libcudnn_adv.so.9"));
  }

  /** The preset functions the engine's sources import statically. */
  private static Set<String> boundFunctions() throws IOException {
    Set<String> names = new TreeSet<>();
    try (Stream<Path> sources = Files.list(ENGINE)) {
      for (Path source : sources.toList()) {
        Matcher m = BOUND.matcher(Files.readString(source));
        while (m.find()) {
          if (!m.group(2).equals(m.group(2).toUpperCase())) { // functions, not constants
            names.add(m.group(2));
          }
        }
      }
    }
    return names;
  }

  /** nm's dynamic symbols of {@code library} as name@version ("@@", a default version, as "@"). */
  private static Set<String> symbols(String which, Path library) throws Exception {
    Process nm = new ProcessBuilder("nm", "-D", which, library.toString()).start();
    String out = new String(nm.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertEquals(0, nm.waitFor(), "nm " + which + " " + library);
    Set<String> symbols = new TreeSet<>();
    for (String line : out.split("\n")) {
      String[] parts = line.trim().split("\\s+");
      if (parts.length >= 2 && parts[parts.length - 1].contains("@")) {
        symbols.add(parts[parts.length - 1].replace("@@", "@"));
      }
    }
    return symbols;
  }
}
