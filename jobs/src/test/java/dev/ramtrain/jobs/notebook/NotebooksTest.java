package dev.ramtrain.jobs.notebook;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every note in notebooks/ runs, paragraph by paragraph, in one Scala 2.13 interpreter shared by
 * the notes (Zeppelin's default binding), on a local Spark session whose spark.ramtrain.*
 * properties stand for the Spark interpreter's: a paragraph error fails naming the note and the
 * paragraph. Then what the notes showed is checked.
 */
class NotebooksTest {
  @TempDir Path tmp;

  @Test
  void everyNoteRunsInOrder() throws Exception {
    Path notes = Path.of(System.getProperty("ramtrain.repo.root"), "notebooks");
    List<Path> files;
    try (Stream<Path> listed = Files.list(notes)) {
      files = listed.filter(p -> p.toString().endsWith(".zpln")).sorted().toList();
    }
    assertEquals(4, files.size(), "the four notes: " + files);
    Path classes = Files.createDirectories(tmp.resolve("repl-classes"));
    SparkSession spark =
        SparkSession.builder()
            .master("local[2]")
            .appName("ramtrain notes")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            // Where the interpreter compiles: served to the executors, as spark-shell does.
            .config("spark.repl.class.outputDir", classes.toString())
            // The interpreter's properties: small and quick, and proof that they reach the notes.
            .config("spark.ramtrain.generate.images-per-class", "10")
            .config("spark.ramtrain.train.threads", "1")
            .getOrCreate();
    try (ScalaNotebook notebook =
        new ScalaNotebook(spark, classes, Map.of("workdir", tmp.resolve("work").toString()))) {
      var look = notebook.run(files.get(0));
      String all = outputs(look);
      assertTrue(all.contains("images per class: 10"), all);
      assertTrue(all.contains("generated 60 images of shapes"), all);
      assertTrue(all.contains("circle        10 files"), "counted by the executors:\n" + all);
      assertTrue(all.contains("augmentation 1 augmented copy per image"), all);
      assertTrue(all.contains("%table class\tsplit\tsamples\n"), all);
      assertTrue(all.contains("%html <img alt=\"contact sheet"), "a contact sheet");

      String plan = outputs(notebook.run(files.get(1)));
      assertTrue(plan.contains("%table device\tmemory_gib\tplacement"), plan);
      assertTrue(plan.contains("t4\t16.0\tresident"), "ResNet-20 fits a T4:\n" + plan);

      var train = notebook.run(files.get(2));
      String trained = outputs(train);
      assertTrue(trained.contains("trained into "), trained);
      String epochs =
          train.stream()
              .filter(p -> p.interpreter().equals("%sql"))
              .findFirst()
              .orElseThrow()
              .output();
      assertEquals(1 + 3, epochs.strip().lines().count(), "a header and 3 epochs:\n" + epochs);
      assertTrue(trained.contains("%html <img alt=\"confusion matrix"), trained);
      assertTrue(Files.exists(tmp.resolve("work/run/report/index.html")));

      String evaluated = outputs(notebook.run(files.get(3)));
      assertTrue(evaluated.contains("val accuracy "), evaluated);
      assertTrue(evaluated.contains("%table path\tprediction\tprobability\terror"), evaluated);
      assertTrue(
          evaluated.matches("(?s).*\\d+ of 20 files classified as another class.*"), evaluated);
      assertFalse(evaluated.contains("Exception"), evaluated);

      // A failing paragraph stops its note, named with the interpreter's message.
      Path broken = tmp.resolve("broken.zpln");
      Files.writeString(
          broken,
          """
          {"name": "broken", "paragraphs": [
            {"text": "%md\\n# fine"},
            {"title": "typo", "text": "%spark\\nval n: Int = \\"three\\""},
            {"text": "%spark\\nprintln(\\"never run\\")"}]}
          """);
      AssertionError typo = assertThrows(AssertionError.class, () -> notebook.run(broken));
      assertTrue(
          typo.getMessage().startsWith("note 'broken', paragraph 2 (typo) failed"),
          typo.getMessage());
      assertTrue(typo.getMessage().contains("type mismatch"), typo.getMessage());
      Files.writeString(
          broken,
          """
          {"name": "thrown", "paragraphs": [
            {"text": "%spark\\nrt.inspect(\\"/no/such/dataset\\")"}]}
          """);
      AssertionError thrown = assertThrows(AssertionError.class, () -> notebook.run(broken));
      assertTrue(
          thrown.getMessage().startsWith("note 'thrown', paragraph 1 failed"), thrown.getMessage());
      assertTrue(thrown.getMessage().contains("/no/such/dataset"), thrown.getMessage());
    } finally {
      spark.stop();
    }
  }

  /** The paragraphs' outputs, inline images shortened (they would fill a failure message). */
  private static String outputs(List<ScalaNotebook.Paragraph> paragraphs) {
    StringBuilder s = new StringBuilder();
    paragraphs.forEach(p -> s.append(p.output()));
    return s.toString().replaceAll("base64,[A-Za-z0-9+/=]+", "base64,...");
  }
}
