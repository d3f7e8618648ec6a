package dev.ramtrain.jobs;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.lang.ArchRule;
import java.util.List;
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

  private static JavaClasses classes;

  @BeforeAll
  static void importMainClasses() {
    classes =
        new ClassFileImporter()
            .withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
            .importPackages("dev.ramtrain");
    // A rule over no classes passes whatever the imports: make sure each module was found.
    for (String module : List.of("format", "etl", "trainer", "jobs")) {
      String prefix = "dev.ramtrain." + module + ".";
      assertTrue(
          classes.stream().anyMatch(c -> c.getName().startsWith(prefix)),
          "no classes of " + prefix + " on the test classpath");
    }
  }

  @Test
  void theShardFormatNeedsOnlyArrowAndJackson() {
    check(
        noClasses()
            .that()
            .resideInAPackage("dev.ramtrain.format..")
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
            .resideInAnyPackage("dev.ramtrain.trainer.backend.*.."));
  }

  private static void check(ArchRule rule) {
    rule.check(classes);
  }
}
