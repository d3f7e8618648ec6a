package dev.ramtrain.jobs;

import dev.ramtrain.etl.dataset.DatasetCommitter;
import dev.ramtrain.etl.shard.ShardFormatException;
import dev.ramtrain.etl.spark.PreprocessException;
import dev.ramtrain.jobs.cli.DemoCommand;
import dev.ramtrain.jobs.cli.EvaluateCommand;
import dev.ramtrain.jobs.cli.GenerateCommand;
import dev.ramtrain.jobs.cli.InspectCommand;
import dev.ramtrain.jobs.cli.PlanCommand;
import dev.ramtrain.jobs.cli.PredictCommand;
import dev.ramtrain.jobs.cli.PreprocessCommand;
import dev.ramtrain.jobs.cli.TrainCommand;
import dev.ramtrain.jobs.config.ConfigException;
import java.io.IOException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/** {@code ramtrain <command>}: the entry point of bin/ramtrain and of spark-submit. */
@Command(
    name = "ramtrain",
    mixinStandardHelpOptions = true,
    version = "ramtrain 0.1.0",
    description = "Prepare image datasets into Arrow shards with Spark, and train on them.",
    subcommands = {
      GenerateCommand.class,
      PreprocessCommand.class,
      InspectCommand.class,
      DemoCommand.class,
      TrainCommand.class,
      EvaluateCommand.class,
      PredictCommand.class,
      PlanCommand.class,
      CommandLine.HelpCommand.class
    })
public final class Main implements Runnable {
  private static final Logger LOG = LoggerFactory.getLogger(Main.class);

  /** Exit status for bad settings or usage. */
  public static final int EXIT_USAGE = 2;

  /** Exit status for a failed run (bad data, I/O). */
  public static final int EXIT_FAILURE = 1;

  @Override
  public void run() {
    CommandLine.usage(this, System.out);
  }

  public static void main(String[] args) {
    System.exit(run(args));
  }

  /** Runs a command line and returns its exit status. */
  public static int run(String... args) {
    CommandLine cli = new CommandLine(new Main());
    cli.setExecutionExceptionHandler(
        (e, commandLine, parseResult) -> {
          LOG.debug("command failed", e);
          boolean usage =
              e instanceof ConfigException || e instanceof DatasetCommitter.DatasetExistsException;
          boolean known =
              usage
                  || e instanceof PreprocessException
                  || e instanceof ShardFormatException
                  || e instanceof IllegalArgumentException
                  || e instanceof IOException;
          commandLine
              .getErr()
              .println("ramtrain " + commandLine.getCommandName() + ": error: " + message(e));
          if (!known) {
            e.printStackTrace(commandLine.getErr());
          }
          return usage ? EXIT_USAGE : EXIT_FAILURE;
        });
    return cli.execute(args);
  }

  private static String message(Throwable e) {
    Throwable root = e;
    while (root.getMessage() == null && root.getCause() != null) {
      root = root.getCause();
    }
    return root.getMessage() == null ? root.toString() : root.getMessage();
  }
}
