package dev.ramtrain.etl.dataset;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ramtrain.format.Manifest;
import dev.ramtrain.format.SafePaths;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The version folders of a dataset directory and what may be deleted of them: only folders that
 * carry ramtrain's marker, and files that ramtrain's own manifest or journal names. A replaced
 * version's files are journaled before the manifest's rename and deleted after it; whoever holds
 * the writer's lock next finishes what a killed writer left.
 */
final class VersionFolders {
  private static final Logger LOG = LoggerFactory.getLogger(VersionFolders.class);
  private static final ObjectMapper JSON = new ObjectMapper();
  static final String RETIRE_PREFIX = "retire-";
  static final String MANIFEST_PREFIX = "manifest-";

  /** A journal being written: renamed to its name when whole, so no journal is ever cut short. */
  private static final String PARTIAL_SUFFIX = ".partial";

  private VersionFolders() {}

  /** The journal of {@code run}'s replacement, in the staging folder. */
  static Path journal(Path dir, String run) {
    return new Path(new Path(dir, DatasetLayout.STAGING), RETIRE_PREFIX + run + ".json");
  }

  static void writeJournal(FileSystem fs, Path journal, List<String> files) throws IOException {
    Path partial = journal.suffix(PARTIAL_SUFFIX);
    DatasetFiles.replace(fs, partial, journal, JSON.writeValueAsBytes(files));
  }

  /**
   * Finishes what dead writers left: their journals (but for what readers still hold), staging
   * folders and uncommitted versions.
   */
  static void cleanUp(FileSystem fs, Path dir, Manifest current) throws IOException {
    Path staging = new Path(dir, DatasetLayout.STAGING);
    Set<String> held = VersionLease.heldEntries(fs, dir);
    if (fs.exists(staging)) {
      finishJournals(fs, dir, current, held);
      for (FileStatus s : fs.listStatus(staging)) {
        if (isJournal(s)) {
          continue; // a replacement whose old version a reader still holds
        }
        String name = s.getPath().getName();
        boolean ours =
            s.isDirectory()
                ? DatasetFiles.hasMarker(fs, s.getPath()) || fs.listStatus(s.getPath()).length == 0
                : name.startsWith(MANIFEST_PREFIX) && name.endsWith(".json")
                    || name.startsWith(RETIRE_PREFIX) && name.endsWith(".json" + PARTIAL_SUFFIX);
        if (ours) {
          LOG.info("removing {}, left by a preprocessing run that did not commit", s.getPath());
          fs.delete(s.getPath(), true);
        } else {
          LOG.warn("leaving {}: not written by ramtrain", s.getPath());
        }
      }
      DatasetFiles.removeIfEmpty(fs, staging);
    }
    Set<String> referenced = topFolders(current);
    for (FileStatus s : fs.listStatus(dir)) {
      String name = s.getPath().getName();
      if (s.isDirectory()
          && DatasetLayout.versionNumber(name) >= 0
          && !referenced.contains(name)
          && !holds(held, name)
          && DatasetFiles.hasMarker(fs, s.getPath())) {
        LOG.info("removing {}, written by a preprocessing run that did not commit", s.getPath());
        fs.delete(s.getPath(), true);
      }
    }
  }

  /** Whether the dataset's staging folder holds a replacement's journal. */
  static boolean hasJournals(FileSystem fs, Path dir) throws IOException {
    Path staging = new Path(dir, DatasetLayout.STAGING);
    if (!fs.exists(staging)) {
      return false;
    }
    for (FileStatus s : fs.listStatus(staging)) {
      if (isJournal(s)) {
        return true;
      }
    }
    return false;
  }

  /** Retires what every journal names and no reader holds now (the writer's lock held). */
  static void finishJournals(FileSystem fs, Path dir, Manifest current) throws IOException {
    if (hasJournals(fs, dir)) {
      finishJournals(fs, dir, current, VersionLease.heldEntries(fs, dir));
    }
  }

  private static void finishJournals(FileSystem fs, Path dir, Manifest current, Set<String> held)
      throws IOException {
    for (FileStatus s : fs.listStatus(new Path(dir, DatasetLayout.STAGING))) {
      if (isJournal(s)) {
        LOG.info("finishing the replacement that {} journaled", s.getPath());
        retireUnheld(fs, dir, s.getPath(), readJournal(fs, s.getPath()), current, held);
      }
    }
  }

  private static boolean isJournal(FileStatus s) {
    String name = s.getPath().getName();
    return s.isFile() && name.startsWith(RETIRE_PREFIX) && name.endsWith(".json");
  }

  /**
   * Deletes the journal's {@code files} that {@code keep} does not name and no reader {@code held}
   * (by the directory entry they are in); the journal then names what readers still hold, or goes.
   * Returns the entries kept for readers.
   */
  static Set<String> retireUnheld(
      FileSystem fs, Path dir, Path journal, List<String> files, Manifest keep, Set<String> held)
      throws IOException {
    List<String> now = new ArrayList<>();
    List<String> later = new ArrayList<>();
    Set<String> kept = new TreeSet<>();
    for (String file : files) {
      String entry = file.contains("/") ? file.substring(0, file.indexOf('/')) : file;
      if (holds(held, entry)) {
        later.add(file);
        kept.add(entry);
      } else {
        now.add(file);
      }
    }
    retire(fs, dir, now, keep);
    if (later.isEmpty()) {
      fs.delete(journal, false);
    } else if (!now.isEmpty()) {
      writeJournal(fs, journal, later);
    }
    return kept;
  }

  private static boolean holds(Set<String> held, String entry) {
    return held.contains(entry) || held.contains("*");
  }

  /** The number of the next version folder: above every one there is or the manifest names. */
  static int nextVersion(FileSystem fs, Path dir, Manifest current) throws IOException {
    int highest = 0;
    for (FileStatus s : fs.listStatus(dir)) {
      highest = Math.max(highest, DatasetLayout.versionNumber(s.getPath().getName()));
    }
    for (String folder : topFolders(current)) {
      highest = Math.max(highest, DatasetLayout.versionNumber(folder));
    }
    return highest + 1;
  }

  /** The version folders a manifest's files are in (none for a dataset of the flat layout). */
  private static Set<String> topFolders(Manifest m) {
    Set<String> folders = new TreeSet<>();
    if (m != null) {
      for (String file : m.files()) {
        int slash = file.indexOf('/');
        if (slash > 0 && DatasetLayout.versionNumber(file.substring(0, slash)) >= 0) {
          folders.add(file.substring(0, slash));
        }
      }
    }
    return folders;
  }

  /** What replacing {@code old} deletes: its files and the markers of its version folders. */
  static List<String> retiringFiles(Manifest old) {
    List<String> files = new ArrayList<>(old.files());
    for (String folder : topFolders(old)) {
      files.add(folder + "/" + DatasetLayout.RUN_MARKER);
    }
    return files;
  }

  /**
   * Deletes {@code files} (relative to {@code dir}) that {@code keep} does not name, then the
   * folders that held them if nothing else is left in them.
   */
  static void retire(FileSystem fs, Path dir, List<String> files, Manifest keep)
      throws IOException {
    Set<String> kept = new HashSet<>(keep == null ? List.of() : keep.files());
    Set<String> folders =
        new TreeSet<>(Comparator.comparingInt(String::length).reversed().thenComparing(s -> s));
    for (String file : files) {
      if (kept.contains(file)) {
        continue;
      }
      fs.delete(new Path(dir, file), false);
      for (int slash = file.lastIndexOf('/'); slash > 0; slash = file.lastIndexOf('/', slash - 1)) {
        folders.add(file.substring(0, slash));
      }
    }
    for (String folder : folders) {
      DatasetFiles.removeIfEmpty(fs, new Path(dir, folder));
    }
  }

  private static List<String> readJournal(FileSystem fs, Path journal) throws IOException {
    if (fs.getFileStatus(journal).getLen() == 0) {
      // Cut short by a kill (written in place before journals were renamed into place): the
      // manifest was not replaced after it, and what it would name is an uncommitted version.
      LOG.warn("{} is empty: a replacement killed while journaling, nothing to retire", journal);
      return List.of();
    }
    List<String> files;
    try (InputStream in = fs.open(journal)) {
      files = JSON.readValue(in, new TypeReference<List<String>>() {});
    } catch (IOException e) {
      throw new IOException("unreadable replacement journal " + journal + ": " + e.getMessage(), e);
    }
    for (String file : files) {
      SafePaths.requireInside(file, journal.toString());
    }
    return files;
  }
}
