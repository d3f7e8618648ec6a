package dev.ramtrain.jobs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.concurrent.Callable;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/**
 * No command ends in an Error's trace: a stack overflow, a native library that did not link or any
 * other Error past the commands' own handling is one line naming the command and what failed, exit
 * 1, the trace in the log.
 */
class MainErrorsTest {
  @Command(name = "boom")
  static final class Boom implements Callable<Integer> {
    private final Error error;

    Boom(Error error) {
      this.error = error;
    }

    @Override
    public Integer call() {
      throw error;
    }
  }

  private static String run(Error error) {
    CommandLine cli = new CommandLine(new Main());
    cli.addSubcommand("boom", new Boom(error));
    StringWriter err = new StringWriter();
    cli.setErr(new PrintWriter(err, true));
    assertEquals(1, Main.run(cli, "boom"), err.toString());
    String out = err.toString().strip();
    assertEquals(1, out.lines().count(), out);
    return out;
  }

  @Test
  void aStackOverflowIsOneLine() {
    String line = run(new StackOverflowError());
    assertTrue(line.startsWith("ramtrain boom: error: ran out of stack"), line);
  }

  @Test
  void anyOtherErrorIsOneLineNamingIt() {
    String line = run(new UnsatisfiedLinkError("no jnidnnl in java.library.path"));
    assertTrue(line.startsWith("ramtrain boom: error: UnsatisfiedLinkError: no jnidnnl"), line);
    assertTrue(run(new OutOfMemoryError("Java heap space")).contains("out of memory"));
  }
}
