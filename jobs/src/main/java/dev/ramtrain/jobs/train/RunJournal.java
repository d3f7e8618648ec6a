package dev.ramtrain.jobs.train;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ramtrain.jobs.report.AtomicFile;
import java.io.IOException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.UUID;

/**
 * What ramtrain wrote in a run directory, {@value #FILE}: the files, by path inside the run, each
 * recorded before it is first written. It is the one proof {@link RunDirectory} goes by before it
 * moves or deletes anything there: a user's {@code checkpoints/export.onnx} or {@code
 * report/slides.pdf} beside a run is never in it, whatever its name. A file counts as recorded when
 * its path is, or when it is the staging ({@code NAME.tmp}) of a recorded path or lies in such a
 * staging folder. Each journal has an id, so that a run replacing another can tell its own journal
 * from the one it moved aside.
 */
public final class RunJournal {
  public static final String FILE = "_ramtrain-run.json";
  private static final ObjectMapper JSON = new ObjectMapper();

  private final Path run;
  private final String id;
  private final TreeSet<String> written;

  private RunJournal(Path run, String id, TreeSet<String> written) {
    this.run = run;
    this.id = id;
    this.written = written;
  }

  /** The journal of {@code run}, or a new empty one (written once something is recorded). */
  public static RunJournal of(Path dir) throws IOException {
    Path run = dir.toAbsolutePath().normalize();
    Path file = run.resolve(FILE);
    return Files.exists(file) ? read(run, file) : new RunJournal(run, newId(), new TreeSet<>());
  }

  /** Reads a journal file of {@code run}, refusing one that names a path outside it. */
  static RunJournal read(Path run, Path file) throws IOException {
    JsonNode root;
    try {
      root = JSON.readTree(file.toFile());
    } catch (IOException e) {
      throw new IOException(file + ": not a ramtrain run journal (" + e.getMessage() + ")", e);
    }
    if (root == null || !root.path("id").isTextual() || !root.path("written").isArray()) {
      throw new IOException(file + ": not a ramtrain run journal (no id and written list)");
    }
    TreeSet<String> written = new TreeSet<>();
    for (JsonNode entry : root.path("written")) {
      written.add(checked(file, entry.asText(null)));
    }
    return new RunJournal(run, root.path("id").asText(), written);
  }

  static String checked(Path file, String relative) throws IOException {
    if (relative == null
        || relative.isEmpty()
        || relative.startsWith("/")
        || relative.contains("\\")
        || relative.contains("\0")) {
      throw new IOException(file + ": names '" + relative + "', not a path inside the run");
    }
    for (String part : relative.split("/", -1)) {
      if (part.isEmpty() || part.equals(".") || part.equals("..")) {
        throw new IOException(file + ": names '" + relative + "', not a path inside the run");
      }
    }
    if (relative.equals(FILE) || relative.startsWith(RunDirectory.PREVIOUS)) {
      throw new IOException(file + ": names '" + relative + "', ramtrain's own bookkeeping");
    }
    return relative;
  }

  private static String newId() {
    return UUID.randomUUID().toString();
  }

  String id() {
    return id;
  }

  /** Whether this journal's file exists (something was recorded). */
  boolean saved() {
    return Files.exists(run.resolve(FILE));
  }

  /** The recorded paths, sorted. */
  public Set<String> written() {
    return new TreeSet<>(written);
  }

  /** Whether ramtrain recorded writing {@code relative} (a path inside the run, '/'-separated). */
  public boolean owns(String relative) {
    if (written.contains(relative)) {
      return true;
    }
    // Staging: NAME.tmp of a recorded NAME (a file, or a folder of recorded files), and what lies
    // in such a staging folder.
    String path = "";
    for (String part : relative.split("/")) {
      path = path.isEmpty() ? part : path + "/" + part;
      if (path.endsWith(".tmp") && recordedOrHolds(path.substring(0, path.length() - 4))) {
        return true;
      }
    }
    // A report file's staging, .NAME.N.tmp beside NAME (AtomicFile).
    int slash = relative.lastIndexOf('/');
    String folder = slash < 0 ? "" : relative.substring(0, slash + 1);
    return AtomicFile.stagedTarget(relative.substring(slash + 1))
        .map(target -> written.contains(folder + target))
        .orElse(false);
  }

  private boolean recordedOrHolds(String path) {
    return written.contains(path)
        || !written.subSet(path + "/", path + "0").isEmpty(); // '0' follows '/'
  }

  /** Whether the file at {@code file} (inside the run) is recorded. */
  public boolean owns(Path file) {
    return owns(relative(file));
  }

  /**
   * Claims {@code file} (inside the run) for writing: refused when it exists and the journal does
   * not record it (a user's file of the same name), recorded otherwise.
   */
  public void claim(Path file) throws IOException {
    if (Files.exists(file, LinkOption.NOFOLLOW_LINKS) && !owns(file)) {
      throw new FileAlreadyExistsException(
          file.toString(), null, "ramtrain did not write it (" + FILE + "): left as it is");
    }
    record(file);
  }

  /** Records {@code files} (inside the run) before they are written; saved at once. */
  public void record(Path... files) throws IOException {
    boolean added = false;
    for (Path file : files) {
      added |= written.add(checked(run.resolve(FILE), relative(file)));
    }
    if (added || !saved()) {
      save();
    }
  }

  /** Forgets {@code relative} paths once they are gone. */
  public void forget(Set<String> gone) throws IOException {
    if (written.removeAll(gone)) {
      save();
    }
  }

  /** The path of {@code file} (absolute, or relative to the working directory) inside the run. */
  String relative(Path file) {
    Path inside = run.relativize(file.toAbsolutePath().normalize());
    if (inside.startsWith("..") || inside.toString().isEmpty()) {
      throw new IllegalArgumentException(file + " is not inside the run directory " + run);
    }
    return inside.toString().replace(java.io.File.separatorChar, '/');
  }

  /** Written beside, then renamed over the old journal: a reader sees the old one or the new. */
  private void save() throws IOException {
    Map<String, Object> root = new LinkedHashMap<>();
    root.put("generator", "ramtrain");
    root.put("id", id);
    root.put("written", written);
    Path tmp = run.resolve("." + FILE + ".tmp");
    Files.write(tmp, JSON.writerWithDefaultPrettyPrinter().writeValueAsBytes(root));
    Files.move(
        tmp,
        run.resolve(FILE),
        StandardCopyOption.ATOMIC_MOVE,
        StandardCopyOption.REPLACE_EXISTING);
  }
}
