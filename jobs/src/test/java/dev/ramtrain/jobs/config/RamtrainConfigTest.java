package dev.ramtrain.jobs.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.etl.image.ResizeMode;
import dev.ramtrain.etl.spark.PreprocessSpec;
import dev.ramtrain.jobs.train.TrainSettings;
import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.trainer.backend.BackendSpec;
import dev.ramtrain.trainer.backend.CpuEngine;
import dev.ramtrain.trainer.backend.CudaSpec;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class RamtrainConfigTest {
  @TempDir Path tmp;

  private Path file(String text) throws Exception {
    Path f = tmp.resolve("user.conf");
    Files.writeString(f, text);
    return f;
  }

  private static void assertMessage(Exception e, String... parts) {
    for (String part : parts) {
      assertTrue(
          e.getMessage().contains(part), "'" + e.getMessage() + "' should contain '" + part + "'");
    }
  }

  @Test
  void defaultsAreTheDocumentedFile() throws Exception {
    RamtrainConfig c = RamtrainConfig.load(null, Map.of(), Map.of());
    String documented =
        Files.readString(
            Path.of(System.getProperty("ramtrain.repo.root"), "conf", "ramtrain-defaults.conf"));
    assertTrue(documented.contains("height = 64"));
    assertEquals(64, c.integer("ramtrain.etl.height"));
    assertEquals(64L << 20, c.bytes("ramtrain.etl.shard-target-bytes"));
    assertEquals(ResizeMode.SHORTER_SIDE_CROP, c.choice("ramtrain.etl.resize", ResizeMode.class));
  }

  @Test
  void eachLayerBeatsTheOneBelow() throws Exception {
    Path user =
        file("ramtrain.etl { height = 100, width = 101, color = grayscale }\nramtrain.seed = 5");
    Map<String, String> spark =
        Map.of(
            "spark.ramtrain.etl.width",
            "201",
            "spark.ramtrain.seed",
            "6",
            "spark.executor.memory",
            "2g");
    Map<String, String> cli = Map.of("ramtrain.seed", "7");
    RamtrainConfig c = RamtrainConfig.load(user, spark, cli);
    assertEquals(100, c.integer("ramtrain.etl.height"), "user file over defaults");
    assertEquals(201, c.integer("ramtrain.etl.width"), "Spark conf over user file");
    assertEquals(7, c.longValue("ramtrain.seed"), "command line over Spark conf");
    assertEquals("grayscale", c.string("ramtrain.etl.color"));
    assertEquals(0.1, c.number("ramtrain.etl.val-fraction"), "untouched default");
  }

  @Test
  void unknownKeyFailsNamingItAndSuggestingTheNearest() throws Exception {
    var e =
        assertThrows(
            ConfigException.class,
            () -> RamtrainConfig.load(file("ramtrain.etl.heigth = 3"), Map.of(), Map.of()));
    assertMessage(
        e,
        "unknown configuration key ramtrain.etl.heigth",
        "user.conf",
        "did you mean ramtrain.etl.height");
    e =
        assertThrows(
            ConfigException.class,
            () -> RamtrainConfig.load(null, Map.of("spark.ramtrain.etl.colour", "rgb"), Map.of()));
    assertMessage(
        e, "ramtrain.etl.colour", "Spark conf spark.ramtrain.etl.colour", "ramtrain.etl.color");
  }

  @Test
  void illTypedValueFailsNamingKeyOriginAndDefault() {
    RamtrainConfig c = RamtrainConfig.load(null, Map.of(), Map.of("ramtrain.etl.height", "tall"));
    var e = assertThrows(ConfigException.class, () -> c.integer("ramtrain.etl.height"));
    assertMessage(
        e, "ramtrain.etl.height", "\"tall\"", "is not a number", "command line", "default: 64");
  }

  @Test
  void badChoiceListsTheAllowedValues() {
    RamtrainConfig c = RamtrainConfig.load(null, Map.of(), Map.of("ramtrain.etl.resize", "squash"));
    var e = assertThrows(ConfigException.class, () -> EtlSettings.preprocessOptions(withOutput(c)));
    assertMessage(e, "ramtrain.etl.resize", "squash", "shorter-side-crop, stretch, letterbox");
  }

  @Test
  void outOfRangeValuesFailNamingTheKey() {
    var e =
        assertThrows(
            ConfigException.class,
            () ->
                EtlSettings.preprocessOptions(
                    RamtrainConfig.load(
                        null,
                        Map.of(),
                        Map.of("ramtrain.etl.output", "/x", "ramtrain.etl.val-fraction", "1.5"))));
    assertMessage(e, "ramtrain.etl.val-fraction");
    e =
        assertThrows(
            ConfigException.class,
            () ->
                EtlSettings.preprocessOptions(
                    RamtrainConfig.load(
                        null,
                        Map.of(),
                        Map.of(
                            "ramtrain.etl.output", "/x", "ramtrain.etl.augment.scale-min", "0"))));
    assertMessage(e, "ramtrain.etl.augment", "scale-min");
    e =
        assertThrows(
            ConfigException.class,
            () -> EtlSettings.preprocessOptions(RamtrainConfig.load(null, Map.of(), Map.of())));
    assertMessage(e, "ramtrain.etl.output", "--output");
  }

  @Test
  void listsCanBeGivenCommaSeparated() {
    RamtrainConfig c =
        RamtrainConfig.load(
            null, Map.of("spark.ramtrain.source.class-names", "tee, trouser,bag"), Map.of());
    assertEquals(List.of("tee", "trouser", "bag"), c.strings("ramtrain.source.class-names"));
  }

  /**
   * A user file that would be ignored whole is refused: a misspelt top level, no ramtrain key, a
   * directory. Numbers are whole where the key is, finite everywhere, in range where the trainer
   * needs it; a local master's thread count is bounded.
   */
  @Test
  void settingsThatWouldBeIgnoredOrTruncatedAreRefused() throws Exception {
    assertMessage(
        assertThrows(
            ConfigException.class,
            () -> RamtrainConfig.load(file("ramtran { etl.height = 3 }"), Map.of(), Map.of())),
        "unknown top-level key 'ramtran'",
        "did you mean ramtrain");
    assertMessage(
        assertThrows(
            ConfigException.class,
            () -> RamtrainConfig.load(file("spark { executor.memory = 2g }"), Map.of(), Map.of())),
        "sets no ramtrain.* key",
        "[spark]");
    assertMessage(
        assertThrows(ConfigException.class, () -> RamtrainConfig.load(tmp, Map.of(), Map.of())),
        "is not a file");
    Map<String, String> bad =
        Map.of(
            "ramtrain.train.epochs", "1.5",
            "ramtrain.train.lr", "Infinity",
            "ramtrain.train.clip-norm", "-1",
            "ramtrain.train.label-smoothing", "1",
            "ramtrain.seed", "NaN");
    for (var setting : bad.entrySet()) {
      var e =
          assertThrows(
              ConfigException.class,
              () ->
                  TrainSettings.read(
                      RamtrainConfig.load(
                          null, Map.of(), Map.of(setting.getKey(), setting.getValue()))),
              setting.toString());
      assertMessage(e, setting.getKey());
    }
    assertMessage(
        assertThrows(
            ConfigException.class,
            () -> dev.ramtrain.jobs.cli.SparkSessions.open("test", "local[999999]")),
        "--master local[999999]",
        "task threads");
    for (String cluster :
        new String[] {"local-cluster[2,1,1024]", "local-cluster[999999,1,1024]"}) {
      assertMessage(
          assertThrows(
              ConfigException.class, () -> dev.ramtrain.jobs.cli.SparkSessions.open("t", cluster)),
          "--master " + cluster,
          "local-cluster is Spark's test-only mode",
          "local[N]");
    }
  }

  /**
   * A substitution nothing defines, or a cycle, in a user file is a usage error naming the file (it
   * was Typesafe's own exception: exit 1).
   */
  @Test
  void unresolvableSubstitutionsAreUsageErrorsNamingTheFile() throws Exception {
    Path unset = Files.writeString(tmp.resolve("unset.conf"), "ramtrain.seed = ${UNSET}\n");
    assertMessage(
        assertThrows(ConfigException.class, () -> RamtrainConfig.load(unset, Map.of(), Map.of())),
        "config file " + unset,
        "UNSET");
    Path cycle =
        Files.writeString(
            tmp.resolve("cycle.conf"),
            "ramtrain.seed = ${first}\nfirst = ${second}\nsecond = ${first}\n");
    assertMessage(
        assertThrows(ConfigException.class, () -> RamtrainConfig.load(cycle, Map.of(), Map.of())),
        "config file " + cycle);
  }

  @Test
  void missingUserFileIsNamed() {
    var e =
        assertThrows(
            ConfigException.class,
            () -> RamtrainConfig.load(tmp.resolve("nope.conf"), Map.of(), Map.of()));
    assertMessage(e, "nope.conf", "does not exist");
  }

  @Test
  void settingsBecomeTheJobsOptions() {
    RamtrainConfig c =
        RamtrainConfig.load(
            null,
            Map.of(),
            Map.of(
                "ramtrain.etl.output",
                "/data/out",
                "ramtrain.etl.height",
                "32",
                "ramtrain.etl.width",
                "48",
                "ramtrain.etl.color",
                "grayscale",
                "ramtrain.etl.augment.copies",
                "2",
                "ramtrain.etl.mode",
                "memory"));
    PreprocessSpec o = EtlSettings.preprocessOptions(c);
    assertEquals(32, o.transform().shape().height());
    assertEquals(48, o.transform().shape().width());
    assertEquals(1, o.transform().shape().channels());
    assertEquals(3, o.transform().augmentation().outputsPerSample());
    assertEquals(PreprocessSpec.Output.MEMORY, o.output());
    assertEquals(4L << 20, o.batchTargetBytes());
  }

  @Test
  void theBackendSettingsBecomeItsSpec() {
    RamtrainConfig defaults = RamtrainConfig.load(null, Map.of(), Map.of());
    assertEquals(CpuEngine.AUTO, TrainSettings.backend(defaults).cpuEngine());
    RamtrainConfig java =
        RamtrainConfig.load(
            null,
            Map.of(),
            Map.of(
                "ramtrain.cpu.engine", "java",
                "ramtrain.train.backend", "cpu",
                "ramtrain.train.threads", "3"));
    BackendSpec spec = TrainSettings.backend(java);
    assertEquals(CpuEngine.JAVA, spec.cpuEngine());
    assertEquals(BackendSpec.Kind.CPU, spec.kind());
    assertEquals(3, spec.threads());
    assertEquals(CpuEngine.JAVA, spec.onDevice(1).cpuEngine(), "kept on another device");
    RamtrainConfig bad = RamtrainConfig.load(null, Map.of(), Map.of("ramtrain.cpu.engine", "mkl"));
    var e = assertThrows(ConfigException.class, () -> TrainSettings.backend(bad));
    assertMessage(e, "ramtrain.cpu.engine", "mkl", "auto, onednn, java");
  }

  @Test
  void theCudaSettingsBecomeItsSpec() {
    RamtrainConfig defaults = RamtrainConfig.load(null, Map.of(), Map.of());
    assertEquals(CudaSpec.defaults(), TrainSettings.backend(defaults).cuda(), "PyTorch's defaults");
    RamtrainConfig set =
        RamtrainConfig.load(
            null,
            Map.of(),
            Map.of(
                "ramtrain.cuda.gemm", "kernels",
                "ramtrain.cuda.conv", "cudnn",
                "ramtrain.cuda.tf32", "off",
                "ramtrain.cuda.library-path", "/opt/cuda/lib64,/opt/cudnn/lib"));
    CudaSpec cuda = TrainSettings.backend(set).cuda();
    assertEquals(
        new CudaSpec(
            CudaSpec.GemmChoice.KERNELS,
            CudaSpec.ConvChoice.CUDNN,
            CudaSpec.Tf32.OFF,
            List.of("/opt/cuda/lib64", "/opt/cudnn/lib")),
        cuda);
    assertEquals(cuda, TrainSettings.backend(set).onDevice(1).cuda(), "kept on another device");
    RamtrainConfig bad = RamtrainConfig.load(null, Map.of(), Map.of("ramtrain.cuda.tf32", "on"));
    var e = assertThrows(ConfigException.class, () -> TrainSettings.backend(bad));
    assertMessage(e, "ramtrain.cuda.tf32", "on", "convolutions, all, off");
  }

  @Test
  void sparkDefaultsTemplateCarriesThePomsJvmFlags() throws Exception {
    String flags = System.getProperty("ramtrain.jvm.flags");
    assertTrue(
        flags != null && flags.contains("--add-opens=java.base/java.nio=ALL-UNNAMED"),
        String.valueOf(flags));
    List<String> lines =
        Files.readAllLines(
            Path.of(
                System.getProperty("ramtrain.repo.root"), "conf", "spark-defaults.conf.template"));
    for (String key : List.of("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")) {
      String line = lines.stream().filter(l -> l.startsWith(key)).findFirst().orElseThrow();
      assertEquals(flags.strip(), line.substring(key.length()).strip(), key);
    }
  }

  private static RamtrainConfig withOutput(RamtrainConfig c) {
    return RamtrainConfig.load(
        null,
        Map.of(),
        Map.of(
            "ramtrain.etl.output", "/x", "ramtrain.etl.resize", c.string("ramtrain.etl.resize")));
  }
}
