package dev.ramtrain.jobs.notebook;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.SparkSession;
import scala.tools.nsc.Settings;
import scala.tools.nsc.interpreter.IMain;
import scala.tools.nsc.interpreter.Results;
import scala.tools.nsc.interpreter.shell.ReplReporterImpl;

/**
 * Runs a Zeppelin note (.zpln) as Zeppelin's Spark interpreter would, without Zeppelin: every
 * {@code %spark} paragraph in order in one Scala 2.13 interpreter, with class-based wrappers (as
 * spark-shell's) compiled into the directory the session serves to its executors, so closures
 * defined in a paragraph ship to them; {@code spark} and {@code z} bound; {@code %sql} paragraphs
 * through {@code spark.sql}; {@code %md} skipped. A paragraph that fails stops the note, naming it.
 */
final class ScalaNotebook implements AutoCloseable {
  /** One paragraph run: its title (or first line), interpreter, code and output. */
  record Paragraph(String title, String interpreter, String code, String output) {}

  private final IMain repl;
  private final StringWriter compilerOutput = new StringWriter();
  private final SparkSession spark;
  private final NoteContext z;
  private final ByteArrayOutputStream output = new ByteArrayOutputStream();
  private final PrintStream out = new PrintStream(output, true, StandardCharsets.UTF_8);

  /** {@code classDir}: where the interpreter writes its classes; the session must serve it. */
  ScalaNotebook(SparkSession spark, Path classDir, java.util.Map<String, String> forms) {
    this.spark = spark;
    this.z = new NoteContext(forms, out);
    Settings settings = new Settings();
    String classpath =
        System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
    List<String> args =
        List.of(
            "-Yrepl-class-based",
            "-Yrepl-outdir",
            classDir.toString(),
            "-classpath",
            classpath,
            "-nowarn");
    var processed =
        settings.processArguments(
            scala.jdk.javaapi.CollectionConverters.asScala(args).toList(), true);
    if (!(Boolean) processed._1()) {
      throw new IllegalStateException("the Scala interpreter refused its settings: " + args);
    }
    this.repl =
        new IMain(settings, new ReplReporterImpl(settings, new PrintWriter(compilerOutput, true)));
    bind("spark", SparkSession.class.getName(), spark);
    bind("z", NoteContext.class.getName(), z);
  }

  private void bind(String name, String type, Object value) {
    Results.Result r =
        repl.bind(name, type, value, scala.collection.immutable.List$.MODULE$.empty());
    if (!(r instanceof Results.Success$)) {
      throw new IllegalStateException("cannot bind " + name + ": " + compilerOutput);
    }
  }

  /** Runs every paragraph of the note in order; fails naming the note and paragraph. */
  List<Paragraph> run(Path note) throws IOException {
    JsonNode json = new ObjectMapper().readTree(note.toFile());
    List<Paragraph> done = new ArrayList<>();
    int number = 0;
    for (JsonNode p : json.path("paragraphs")) {
      number++;
      String text = p.path("text").asText("");
      String firstLine = text.lines().findFirst().orElse("").strip();
      String interpreter = firstLine.startsWith("%") ? firstLine.split("\\s+")[0] : "%spark";
      String code =
          firstLine.startsWith("%")
              ? text.substring(text.indexOf(firstLine) + interpreter.length())
              : text;
      String title =
          "note '"
              + json.path("name").asText(note.getFileName().toString())
              + "', paragraph "
              + number
              + (p.has("title") ? " (" + p.path("title").asText() + ")" : "");
      output.reset();
      compilerOutput.getBuffer().setLength(0);
      switch (interpreter) {
        case "%md" -> {}
        case "%sql", "%spark.sql" -> {
          try {
            z.show(spark.sql(code.strip()));
          } catch (RuntimeException e) {
            throw new AssertionError(title + " (%sql) failed: " + e.getMessage(), e);
          }
        }
        case "%spark", "%spark.spark" -> interpret(title, code);
        default -> throw new AssertionError(title + ": interpreter " + interpreter + " is not run");
      }
      done.add(new Paragraph(title, interpreter, code, output.toString(StandardCharsets.UTF_8)));
    }
    return done;
  }

  private void interpret(String title, String code) {
    PrintStream stdout = System.out;
    Results.Result r;
    try {
      System.setOut(out); // println in a paragraph is its output, as in Zeppelin
      r = scala.Console.withOut(out, () -> repl.interpret(code));
    } finally {
      System.setOut(stdout);
    }
    if (!(r instanceof Results.Success$)) {
      String why = (compilerOutput + "\n" + output.toString(StandardCharsets.UTF_8)).strip();
      throw new AssertionError(
          title + " failed (" + r + "):\n" + (why.length() > 4000 ? why.substring(0, 4000) : why));
    }
  }

  NoteContext z() {
    return z;
  }

  @Override
  public void close() {
    repl.close();
  }
}
