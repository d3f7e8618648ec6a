package dev.ramtrain.etl.dataset;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.ramtrain.format.Manifest;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.UUID;
import java.util.regex.Pattern;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A reader's hold on the version of a dataset it reads, so that {@code preprocess --overwrite}
 * keeps that version until the reader is done (a replacement deleted {@code v0001} under a training
 * run reading it a window at a time, which died on a missing shard). The lease is a file {@code
 * _readers/ID.json} naming its holder (as the writer's lock does, with a heartbeat) and the entries
 * of the directory its manifest reads ({@code v0001}); a writer retires a replaced version only
 * when no live lease names it, and leaves its journal for whoever comes next: the last reader to
 * close, or the next writer.
 *
 * <p>The reader reads the manifest, takes its lease, and reads the manifest again: a writer lists
 * the leases after its commit point, so either it sees this lease or this reader sees the new
 * manifest (and leases that version instead). A directory the reader may not write (read-only
 * storage) gets no lease: a warning says that a replacement there could remove the files read.
 */
public final class VersionLease implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(VersionLease.class);
  private static final ObjectMapper JSON = new ObjectMapper();
  public static final String FOLDER = "_readers";
  private static final Pattern NAME = Pattern.compile("[0-9a-f-]{36}\\.json");

  private final Dataset dataset;
  private final FileSystem fs;
  private final Path dir;
  private final Configuration conf;
  private final HeldFile held; // null: no lease could be taken

  private VersionLease(
      Dataset dataset, FileSystem fs, Path dir, Configuration conf, HeldFile held) {
    this.dataset = dataset;
    this.fs = fs;
    this.dir = dir;
    this.conf = conf;
    this.held = held;
  }

  /** Opens the dataset at {@code location} and holds the version its manifest names. */
  public static VersionLease take(String location, Configuration conf, String purpose)
      throws IOException {
    Path dir = new Path(location);
    FileSystem fs = DatasetFiles.fileSystem(dir, conf);
    Dataset dataset = Dataset.open(location, conf);
    for (int attempt = 0; attempt < 10; attempt++) {
      Set<String> reads = entriesRead(dataset.manifest());
      HeldFile held;
      try {
        held = create(fs, dir, purpose, reads);
      } catch (IOException e) {
        LOG.warn(
            "cannot register as a reader of {} ({}): a preprocess --overwrite there meanwhile could"
                + " remove the files this run reads",
            location,
            e.getMessage());
        return new VersionLease(dataset, fs, dir, conf, null);
      }
      Dataset again = Dataset.open(location, conf);
      if (entriesRead(again.manifest()).equals(reads)) {
        return new VersionLease(dataset, fs, dir, conf, held);
      }
      held.close(); // replaced between the two reads: hold the new version instead
      removeFolderIfEmpty(fs, dir);
      dataset = again;
    }
    throw new IOException(
        location + ": replaced ten times while opening it; is a writer replacing it in a loop?");
  }

  /** The dataset as the held version's manifest describes it. */
  public Dataset dataset() {
    return dataset;
  }

  /**
   * Releases the lease; a replacement that kept this version for its readers is finished when this
   * was its last one and no writer holds the directory.
   */
  @Override
  public void close() {
    if (held == null) {
      return;
    }
    held.close();
    try {
      removeFolderIfEmpty(fs, dir);
      if (VersionFolders.hasJournals(fs, dir)) {
        finishReplacements();
      }
    } catch (IOException | RuntimeException e) {
      LOG.warn(
          "could not finish removing a replaced version of {}: {} (the next preprocess does)",
          DatasetFiles.shown(dir),
          e.getMessage());
    }
  }

  private void finishReplacements() throws IOException {
    DirectoryLock lock;
    try {
      lock = DirectoryLock.acquire(dir, conf, "removing a replaced version after reading it");
    } catch (DirectoryLock.LockedException e) {
      return; // a writer is at work: it finishes what replacements left
    }
    try (lock) {
      VersionFolders.finishJournals(fs, dir, Dataset.open(dir.toString(), conf).manifest());
      DatasetFiles.removeIfEmpty(fs, new Path(dir, DatasetLayout.STAGING));
    }
  }

  /**
   * The directory entries live readers hold ({@code v0001}, or a flat dataset's {@code train}...).
   * Lease files whose holder is gone are removed; unreadable ones are judged by their age.
   */
  static Set<String> heldEntries(FileSystem fs, Path dir) throws IOException {
    Path folder = new Path(dir, FOLDER);
    Set<String> held = new TreeSet<>();
    FileStatus status = DatasetFiles.status(fs, folder);
    if (status == null || !status.isDirectory()) {
      return held;
    }
    for (FileStatus s : fs.listStatus(folder)) {
      if (!s.isFile() || !NAME.matcher(s.getPath().getName()).matches()) {
        continue; // not a lease: none of ramtrain's business
      }
      HeldFile.Found found = HeldFile.read(fs, s.getPath());
      if (found == null) {
        continue; // released meanwhile
      }
      Holder holder = null;
      List<String> reads = null;
      try {
        JsonNode lease = JSON.readTree(found.content());
        holder = JSON.treeToValue(lease.get("holder"), Holder.class);
        reads = new ArrayList<>();
        for (JsonNode entry : lease.withArray("reads")) {
          reads.add(entry.asText());
        }
      } catch (IOException | RuntimeException e) {
        // being written this instant, or damaged: judged by its age alone
      }
      String stale = Holder.staleReason(holder, found.ageMillis(), DirectoryLock.STALE_AFTER);
      if (stale != null) {
        LOG.info("removing the lease {}: {}", DatasetFiles.shown(s.getPath()), stale);
        fs.delete(s.getPath(), false);
      } else if (reads == null) {
        held.add("*"); // a lease not yet readable holds everything until it can be read
      } else {
        held.addAll(reads);
        LOG.info("{} reads {}: kept for it", holder.describe(), String.join(", ", reads));
      }
    }
    removeFolderIfEmpty(fs, dir);
    return held;
  }

  private static HeldFile create(FileSystem fs, Path dir, String purpose, Set<String> reads)
      throws IOException {
    Path folder = new Path(dir, FOLDER);
    ObjectNode lease = JSON.createObjectNode();
    lease.set("holder", JSON.valueToTree(Holder.current(purpose)));
    reads.forEach(lease.putArray("reads")::add);
    Path file = new Path(folder, UUID.randomUUID() + ".json");
    for (int attempt = 0; ; attempt++) {
      if (!fs.mkdirs(folder)) {
        throw new IOException("cannot create " + DatasetFiles.shown(folder));
      }
      try {
        HeldFile held =
            HeldFile.create(fs, file, JSON.writeValueAsBytes(lease), "ramtrain-lease-heartbeat");
        if (held == null) {
          throw new IOException(DatasetFiles.shown(file) + " exists already");
        }
        return held;
      } catch (IOException e) {
        if (attempt == 3 || fs.exists(folder)) {
          throw e;
        }
        // the last reader leaving removed the empty folder between our mkdirs and our create
      }
    }
  }

  /** The directory's top-level entries a manifest's files are in. */
  static Set<String> entriesRead(Manifest manifest) {
    Set<String> entries = new TreeSet<>();
    for (String file : manifest.files()) {
      int slash = file.indexOf('/');
      entries.add(slash > 0 ? file.substring(0, slash) : file);
    }
    return entries;
  }

  private static void removeFolderIfEmpty(FileSystem fs, Path dir) throws IOException {
    DatasetFiles.removeIfEmpty(fs, new Path(dir, FOLDER));
  }
}
