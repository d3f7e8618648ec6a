package dev.ramtrain.etl.dataset;

import java.io.IOException;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.time.Instant;
import java.util.UUID;

/**
 * Who holds a lock or a reader's lease, as its file says: user, host, boot, pid and that process's
 * start (against pid reuse), since when, for what.
 */
record Holder(
    String id,
    String user,
    String host,
    String bootId,
    long pid,
    String processStart,
    String since,
    String purpose) {

  static Holder current(String purpose) {
    ProcessHandle self = ProcessHandle.current();
    return new Holder(
        UUID.randomUUID().toString(),
        System.getProperty("user.name"),
        currentHost(),
        currentBootId(),
        self.pid(),
        self.info().startInstant().map(Instant::toString).orElse(null),
        Instant.now().toString(),
        purpose);
  }

  /** How a person recognises the holder. */
  String describe() {
    return String.format(
        "%s (pid %d of user %s on host %s, since %s)", purpose, pid, user, host, since);
  }

  /**
   * Why this holder is known to be gone, or null while it may still be alive: on this host by its
   * process (a changed boot id means a reboot), elsewhere by a file refreshed {@code ageMillis} ago
   * against {@code staleAfter}. A null holder (an unreadable file) is judged by its age alone.
   */
  static String staleReason(Holder h, long ageMillis, Duration staleAfter) {
    if (h != null && h.host() != null && h.host().equals(currentHost())) {
      String boot = currentBootId();
      if (h.bootId() != null && boot != null && !h.bootId().equals(boot)) {
        return "its host " + h.host() + " has restarted since";
      }
      if (!alive(h.pid(), h.processStart())) {
        return "its process " + h.pid() + " on this host is no longer running";
      }
      return null; // alive here, however old its heartbeat (a stopped process still writes later)
    }
    if (ageMillis > staleAfter.toMillis()) {
      return "no heartbeat for " + Duration.ofMillis(ageMillis).toSeconds() + " s";
    }
    return null;
  }

  private static boolean alive(long pid, String processStart) {
    return ProcessHandle.of(pid)
        .map(
            p -> {
              if (processStart == null) {
                return true;
              }
              Instant recorded = Instant.parse(processStart);
              return p.info()
                  .startInstant()
                  .map(s -> Math.abs(Duration.between(s, recorded).toMillis()) < 1000)
                  .orElse(true);
            })
        .orElse(false);
  }

  private static String currentHost() {
    try {
      return InetAddress.getLocalHost().getHostName();
    } catch (IOException e) {
      String env = System.getenv("HOSTNAME");
      return env == null ? "unknown-host" : env;
    }
  }

  private static String currentBootId() {
    try {
      return Files.readString(Paths.get("/proc/sys/kernel/random/boot_id")).strip();
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }
}
