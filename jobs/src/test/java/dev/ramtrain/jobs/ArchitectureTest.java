package dev.ramtrain.jobs;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.classes;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.lang.ArchRule;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Collectors;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The "never" rules of docs/architecture.md, checked on the compiled classes of every module (jobs
 * sees them all on its test classpath). A rule broken by a new import fails the build with the
 * offending class, member and line.
 */
class ArchitectureTest {
  private static final String[] SPARK_HADOOP_OPENCV = {
    "org.apache.spark..", "org.apache.hadoop..", "scala..", "org.bytedeco.opencv.."
  };

  private static final String[] ENGINES = {
    "dev.ramtrain.trainer.backend.cpu..", "dev.ramtrain.trainer.backend.cuda.."
  };

  private static JavaClasses classes;

  @BeforeAll
  static void importMainClasses() {
    classes =
        new ClassFileImporter()
            .withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
            .importPackages("dev.ramtrain");
    // A rule over no classes passes whatever the imports: make sure each module was found.
    for (String module :
        List.of(
            "format",
            "console",
            "files",
            "random",
            "settings",
            "threads",
            "etl",
            "trainer",
            "jobs")) {
      String prefix = "dev.ramtrain." + module + ".";
      assertTrue(
          classes.stream().anyMatch(c -> c.getName().startsWith(prefix)),
          "no classes of " + prefix + " on the test classpath");
    }
  }

  /**
   * The etl/format module: the shard format, and the utilities every module shares (console lines,
   * file errors and commit pause points, seeds, waits an interrupt cannot cut short), each in a
   * package named for what it is.
   */
  @Test
  void theShardFormatNeedsOnlyArrowAndJackson() {
    check(
        noClasses()
            .that()
            .resideInAnyPackage(
                "dev.ramtrain.format..",
                "dev.ramtrain.console..",
                "dev.ramtrain.files..",
                "dev.ramtrain.random..",
                "dev.ramtrain.settings..",
                "dev.ramtrain.threads..")
            .should()
            .dependOnClassesThat()
            .resideInAnyPackage(SPARK_HADOOP_OPENCV)
            .orShould()
            .dependOnClassesThat()
            .resideInAnyPackage(
                "dev.ramtrain.etl..", "dev.ramtrain.trainer..", "dev.ramtrain.jobs.."));
  }

  @Test
  void theTrainerNeverSeesSparkOrTheEtl() {
    check(
        noClasses()
            .that()
            .resideInAPackage("dev.ramtrain.trainer..")
            .should()
            .dependOnClassesThat()
            .resideInAnyPackage(SPARK_HADOOP_OPENCV)
            .orShould()
            .dependOnClassesThat()
            .resideInAnyPackage("dev.ramtrain.etl..", "dev.ramtrain.jobs.."));
  }

  @Test
  void theEtlNeverSeesTheTrainer() {
    check(
        noClasses()
            .that()
            .resideInAPackage("dev.ramtrain.etl..")
            .should()
            .dependOnClassesThat()
            .resideInAnyPackage("dev.ramtrain.trainer..", "dev.ramtrain.jobs.."));
  }

  /**
   * A training run is assembled in one place, the trainer's {@code run} package: jobs read
   * settings, open data and start Spark, and hand a {@code RunSpec} to {@code TrainingSession};
   * they never build the loop or a learner themselves.
   */
  @Test
  void onlyTheTrainersRunPackageAssemblesATrainingRun() {
    check(
        noClasses()
            .that()
            .resideOutsideOfPackages("dev.ramtrain.trainer..")
            .should()
            .dependOnClassesThat()
            .haveFullyQualifiedName("dev.ramtrain.trainer.Trainer")
            .orShould()
            .dependOnClassesThat()
            .areAssignableTo("dev.ramtrain.trainer.Learner"));
  }

  /**
   * Layers, optimizers, loaders and the offload schedule speak to {@code Backend} only; a concrete
   * backend (cpu, and cuda next) is chosen in one place, {@code Backends}.
   */
  @Test
  void modelCodeUsesNoConcreteBackend() {
    check(
        noClasses()
            .that()
            .resideInAnyPackage(
                "dev.ramtrain.trainer.nn..",
                "dev.ramtrain.trainer.optim..",
                "dev.ramtrain.trainer.data..",
                "dev.ramtrain.trainer.offload..",
                "dev.ramtrain.trainer.checkpoint..")
            .should()
            .dependOnClassesThat()
            .resideInAnyPackage(ENGINES));
  }

  /**
   * An operation is described once, engine-free: its record in {@code backend.ops} (arguments and
   * their checks) depends on nothing but the backend's own types, and each engine implements it in
   * its own package without reaching into the other engine.
   */
  @Test
  void operationsAreEngineFreeRecords() {
    check(
        classes()
            .that()
            .resideInAPackage("dev.ramtrain.trainer.backend.ops..")
            .and()
            .areNotInterfaces()
            .should()
            .beRecords()
            .andShould()
            .onlyDependOnClassesThat()
            .resideInAnyPackage(
                "java..", "dev.ramtrain.trainer.backend", "dev.ramtrain.trainer.backend.ops.."));
    check(
        noClasses()
            .that()
            .resideInAPackage("dev.ramtrain.trainer.backend")
            .should()
            .dependOnClassesThat()
            .resideInAnyPackage(ENGINES)
            .as("the backend's interface package names no engine"));
    check(
        noClasses()
            .that()
            .resideInAPackage("dev.ramtrain.trainer.backend.cpu..")
            .should()
            .dependOnClassesThat()
            .resideInAPackage("dev.ramtrain.trainer.backend.cuda.."));
    check(
        noClasses()
            .that()
            .resideInAPackage("dev.ramtrain.trainer.backend.cuda..")
            .should()
            .dependOnClassesThat()
            .resideInAPackage("dev.ramtrain.trainer.backend.cpu.."));
  }

  /**
   * One place picks an engine ({@code Backends} in {@code backend.engines}): outside the engines'
   * own packages nothing in the trainer names one.
   */
  @Test
  void onlyTheEngineFactoryNamesAnEngine() {
    check(
        noClasses()
            .that()
            .resideInAPackage("dev.ramtrain.trainer..")
            .and()
            .resideOutsideOfPackages(
                "dev.ramtrain.trainer.backend.cpu..",
                "dev.ramtrain.trainer.backend.cuda..",
                "dev.ramtrain.trainer.backend.engines..")
            .should()
            .dependOnClassesThat()
            .resideInAnyPackage(ENGINES));
  }

  /**
   * The notebook API and the CLI are two front ends over the same packages: neither calls the
   * other.
   */
  @Test
  void theApiAndTheCliAreIndependentFrontEnds() {
    check(
        noClasses()
            .that()
            .resideInAPackage("dev.ramtrain.jobs.api..")
            .should()
            .dependOnClassesThat()
            .resideInAPackage("dev.ramtrain.jobs.cli.."));
    check(
        noClasses()
            .that()
            .resideInAPackage("dev.ramtrain.jobs.cli..")
            .should()
            .dependOnClassesThat()
            .resideInAPackage("dev.ramtrain.jobs.api.."));
  }

  /**
   * No two packages depend on each other, directly or around a loop, in any module: each package
   * can be read, tested and moved with only what it imports.
   */
  @Test
  void packagesFormNoCycles() {
    check(slices().matching("dev.ramtrain.(**)").should().beFreeOfCycles());
  }

  /**
   * A simple name means one type: no two top-level types share one, and no nested type takes a
   * top-level type's (a reader who meets {@code Model} or {@code Device} knows which is meant).
   */
  @Test
  void eachSimpleNameIsOneType() {
    Map<String, List<String>> topLevel =
        classes.stream()
            .filter(c -> c.isTopLevelClass() && !c.getSimpleName().equals("package-info"))
            .collect(
                Collectors.groupingBy(
                    JavaClass::getSimpleName,
                    TreeMap::new,
                    Collectors.mapping(JavaClass::getName, Collectors.toList())));
    List<String> clashes = new ArrayList<>();
    topLevel.forEach(
        (name, types) -> {
          if (types.size() > 1) {
            clashes.add(name + ": " + types);
          }
        });
    classes.stream()
        .filter(c -> c.isNestedClass() && !c.isAnonymousClass() && !c.isLocalClass())
        .filter(c -> topLevel.containsKey(c.getSimpleName()))
        .forEach(c -> clashes.add(c.getName() + " and " + topLevel.get(c.getSimpleName())));
    assertTrue(clashes.isEmpty(), "simple names with more than one type: " + clashes);
  }

  private static void check(ArchRule rule) {
    rule.check(classes);
  }
}
