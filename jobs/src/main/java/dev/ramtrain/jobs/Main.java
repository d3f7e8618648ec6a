package dev.ramtrain.jobs;

import dev.ramtrain.console.Printable;
import dev.ramtrain.jobs.cli.DemoCommand;
import dev.ramtrain.jobs.cli.EvaluateCommand;
import dev.ramtrain.jobs.cli.GenerateCommand;
import dev.ramtrain.jobs.cli.InspectCommand;
import dev.ramtrain.jobs.cli.OptionDefaults;
import dev.ramtrain.jobs.cli.PipelineCommand;
import dev.ramtrain.jobs.cli.PlanCommand;
import dev.ramtrain.jobs.cli.PredictCommand;
import dev.ramtrain.jobs.cli.PreprocessCommand;
import dev.ramtrain.jobs.cli.ReportCommand;
import dev.ramtrain.jobs.cli.TrainCommand;
import java.util.concurrent.Callable;
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
      PipelineCommand.class,
      TrainCommand.class,
      EvaluateCommand.class,
      PredictCommand.class,
      PlanCommand.class,
      ReportCommand.class,
      CommandLine.HelpCommand.class
    })
public final class Main implements Callable<Integer> {
  /** The full trace of a failure goes here: to the log file only, never the console. */
  private static final Logger FAILURE = LoggerFactory.getLogger("dev.ramtrain.failure");

  /** Where bin/ramtrain's log4j configuration writes the full log; named in error lines. */
  public static final String LOG_FILE_PROPERTY = "ramtrain.log.file";

  /** Exit status for bad settings or usage. */
  public static final int EXIT_USAGE = 2;

  /** Exit status for a failed run (bad data, I/O). */
  public static final int EXIT_FAILURE = 1;

  /** No command given: the usage, as a usage error. */
  @Override
  public Integer call() {
    CommandLine.usage(this, System.err);
    return EXIT_USAGE;
  }

  public static void main(String[] args) {
    System.exit(run(args));
  }

  /**
   * Runs a command line and returns its exit status. A failure prints one line on standard error:
   * the command, what failed and its root cause, and where the full log is; the stack trace goes to
   * that log (to standard error only for a failure ramtrain did not expect and no log file).
   */
  public static int run(String... args) {
    return run(new CommandLine(new Main()), args);
  }

  /** As above on {@code cli}: ramtrain's commands, and a test's own beside them. */
  static int run(CommandLine cli, String... args) {
    OptionDefaults.show(cli);
    cli.setUsageHelpAutoWidth(true); // the terminal's width where it is known
    // A bad flag or value: one line naming it and where the help is, not the whole usage.
    cli.setParameterExceptionHandler(
        (e, badArgs) -> {
          CommandLine where = e.getCommandLine();
          String name = where.getCommandSpec().qualifiedName();
          where.getErr().println(name + ": error: " + e.getMessage());
          CommandLine.UnmatchedArgumentException.printSuggestions(e, where.getErr());
          where.getErr().println("see '" + name + " --help'");
          return EXIT_USAGE;
        });
    cli.setExecutionExceptionHandler(
        (e, commandLine, parseResult) -> {
          FAILURE.error("ramtrain {} failed", commandLine.getCommandName(), e);
          boolean usage = Failures.isUsage(e);
          String log = System.getProperty(LOG_FILE_PROPERTY);
          String where = usage || log == null ? "" : " (full log: " + log + ")";
          commandLine
              .getErr()
              .println(
                  "ramtrain "
                      + commandLine.getCommandName()
                      + ": error: "
                      + Printable.of(Failures.describe(e)) // paths may hold escapes
                      + where);
          if (!Failures.isExpected(e) && log == null) {
            e.printStackTrace(commandLine.getErr());
          }
          return usage ? EXIT_USAGE : EXIT_FAILURE;
        });
    try {
      return cli.execute(args);
    } catch (OutOfMemoryError e) { // picocli hands Errors on: one line here too, the trace logged
      return outOfMemory(cli, e);
    } catch (StackOverflowError e) {
      return fatal(cli, e, "ran out of stack: an input nested deeper than it reads");
    } catch (Error e) { // a library that did not load, an assertion: one line, the trace logged
      return fatal(cli, e, e.getClass().getSimpleName());
    }
  }

  /** The command's name for a one-line error: {@code ramtrain train}, or {@code ramtrain}. */
  private static String commandName(CommandLine cli) {
    CommandLine.ParseResult parsed = cli.getParseResult();
    return parsed == null || parsed.subcommand() == null
        ? "ramtrain"
        : "ramtrain " + parsed.subcommand().commandSpec().name();
  }

  /** An Error past every handler: one line saying {@code what} and where the trace is, exit 1. */
  private static int fatal(CommandLine cli, Error e, String what) {
    String command = commandName(cli);
    FAILURE.error("{} failed: {}", command, what, e);
    String log = System.getProperty(LOG_FILE_PROPERTY);
    String message = e.getMessage() == null ? "" : ": " + Printable.of(e.getMessage());
    cli.getErr()
        .println(
            command
                + ": error: "
                + what
                + (message.length() > 200 ? "" : message)
                + (log == null ? "" : " (full log: " + log + ")"));
    return EXIT_FAILURE;
  }

  /**
   * The JVM's heap, or JavaCPP's native buffers (held to the heap's size by default), ran out: one
   * line saying which and what raises it, the trace in the log.
   */
  private static int outOfMemory(CommandLine cli, OutOfMemoryError e) {
    String command = commandName(cli);
    FAILURE.error("{} ran out of memory", command, e);
    String log = System.getProperty(LOG_FILE_PROPERTY);
    cli.getErr()
        .println(
            command
                + ": error: out of memory: "
                + Printable.of(Failures.describe(e))
                + "; the JVM's heap and JavaCPP's native buffers are limited by -Xmx"
                + " (bin/ramtrain's --driver-memory, RAMTRAIN_JAVA_OPTS)"
                + (log == null ? "" : " (full log: " + log + ")"));
    return EXIT_FAILURE;
  }
}
