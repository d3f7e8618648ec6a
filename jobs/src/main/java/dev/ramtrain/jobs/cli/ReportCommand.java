package dev.ramtrain.jobs.cli;

import dev.ramtrain.jobs.report.TrainingReport;
import dev.ramtrain.jobs.train.RunJournal;
import dev.ramtrain.settings.ConfigException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

@Command(
    name = "report",
    mixinStandardHelpOptions = true,
    header = "Draw a run's report again, or compare several runs in one report.",
    description = {
      "Draws the report of a training run from its metrics.jsonl, latest checkpoint and kept"
          + " final evaluation: RUN/report/index.html (interactive, self-contained: it opens"
          + " offline) and a PNG per chart. With several runs, their charts are overlaid and"
          + " the settings that differ between them listed, into the folder -o names.",
      "A run that is still training can be reported: the report shows what it has logged."
    })
public final class ReportCommand implements Callable<Integer> {
  @Parameters(arity = "1..*", paramLabel = "RUN", description = "Run directories (train -o).")
  List<Path> runs;

  @Option(
      names = {"-o", "--output"},
      paramLabel = "DIR",
      description =
          "Folder for the report (default: RUN/report for one run; required for several).")
  Path output;

  @Override
  public Integer call() throws IOException {
    for (Path run : runs) {
      if (!Files.isRegularFile(run.resolve("metrics.jsonl"))) {
        throw new ConfigException(
            run + " is not a ramtrain run directory (it has no metrics.jsonl)");
      }
    }
    if (output == null && runs.size() > 1) {
      throw new ConfigException(
          "comparing " + runs.size() + " runs: say where the report goes with -o DIR");
    }
    Path own = runs.get(0).resolve("report").toAbsolutePath().normalize();
    Path index =
        runs.size() == 1 && (output == null || output.toAbsolutePath().normalize().equals(own))
            ? TrainingReport.redraw(runs.get(0), RunJournal.of(runs.get(0))::claim)
            : TrainingReport.draw(runs, output);
    System.out.println("report " + index.toAbsolutePath());
    return 0;
  }
}
