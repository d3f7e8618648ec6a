package dev.ramtrain.jobs;

import dev.ramtrain.etl.dataset.DatasetCommitter;
import dev.ramtrain.etl.dataset.NoDatasetException;
import dev.ramtrain.etl.spark.PreprocessException;
import dev.ramtrain.jobs.train.RankFailedException;
import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.trainer.backend.BackendUnavailableException;
import dev.ramtrain.trainer.backend.OutOfDeviceMemoryException;
import dev.ramtrain.trainer.data.BadSampleException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * What a person reads when a command fails: one line with what failed and its root cause ("No space
 * left on device writing .../part-00003.arrow"), however many layers wrapped it (Spark's job
 * failure, unchecked wrappers, the executor's copy of a task's exception); and whether it was a
 * usage error (exit 2) or a failed run (exit 1).
 */
final class Failures {
  /** Spark's "Job aborted due to stage failure: ... Lost task 3.0 in stage 2.0 (...): CAUSE". */
  private static final Pattern LOST_TASK =
      Pattern.compile("most recent failure: Lost task [^:]*?\\): (.*)");

  /** A class name in front of a message ("java.io.IOException: ..."), which a person can skip. */
  private static final Pattern CLASS_PREFIX =
      Pattern.compile("^(?:[a-z][\\w$]*\\.)+[A-Z][\\w$]*(?:Exception|Error): ");

  private Failures() {}

  /**
   * Bad settings, flags, an input that is not there, an output that cannot be written safely, or a
   * backend this machine cannot give: exit 2.
   */
  static boolean isUsage(Throwable e) {
    return chain(e).stream()
        .anyMatch(
            t ->
                t instanceof ConfigException
                    || t instanceof NoDatasetException
                    || t instanceof DatasetCommitter.UnsafeOutputException
                    || t instanceof BackendUnavailableException);
  }

  /** Failures ramtrain expects and explains (bad data, I/O, settings): no stack trace needed. */
  static boolean isExpected(Throwable e) {
    return chain(e).stream()
        .anyMatch(
            t ->
                t instanceof IOException
                    || t instanceof UncheckedIOException
                    || t instanceof ConfigException
                    || t instanceof PreprocessException
                    || t instanceof RankFailedException
                    || t instanceof BackendUnavailableException
                    || t instanceof BadSampleException
                    || t instanceof OutOfDeviceMemoryException
                    || t instanceof IllegalArgumentException);
  }

  /** The one line (or, for a list of rejected inputs, the lines) to print. */
  static String describe(Throwable e) {
    List<String> messages = new ArrayList<>();
    for (Throwable t : chain(e)) {
      String m = ownMessage(t);
      if (m != null && messages.stream().noneMatch(seen -> seen.contains(m))) {
        messages.add(m);
      }
    }
    if (messages.isEmpty()) {
      return e.toString();
    }
    if (e instanceof PreprocessException) {
      return e.getMessage(); // its lines list the first rejected inputs
    }
    String outer = messages.get(0);
    String root = messages.get(messages.size() - 1);
    String line = outer.contains(root) ? outer : outer + ": " + root;
    return line.lines().findFirst().orElse(line);
  }

  /**
   * What {@code t} adds to the story, or null: a wrapper's message that only repeats its cause's
   * ("java.io.IOException: x") adds nothing, and Spark's job failure adds only its task's cause.
   */
  private static String ownMessage(Throwable t) {
    String m = t.getMessage();
    if (m == null || m.isBlank()) {
      return null;
    }
    if (t.getCause() != null && m.equals(t.getCause().toString())) {
      return null;
    }
    if (t.getClass().getName().equals("org.apache.spark.SparkException")) {
      if (t.getCause() != null) {
        return null;
      }
      Matcher lost = LOST_TASK.matcher(m.lines().findFirst().orElse(m));
      m = lost.find() ? lost.group(1) : m;
    }
    String first = m.lines().findFirst().orElse(m).strip();
    Matcher prefix = CLASS_PREFIX.matcher(first);
    return prefix.find()
        ? first.substring(prefix.end())
        : t instanceof PreprocessException ? m : first;
  }

  private static List<Throwable> chain(Throwable e) {
    List<Throwable> chain = new ArrayList<>();
    Set<Throwable> seen = Collections.newSetFromMap(new IdentityHashMap<>());
    for (Throwable t = e; t != null && seen.add(t); t = t.getCause()) {
      chain.add(t);
    }
    return chain;
  }
}
