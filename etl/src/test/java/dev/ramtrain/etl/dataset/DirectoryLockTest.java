package dev.ramtrain.etl.dataset;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.apache.hadoop.conf.Configuration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class DirectoryLockTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  @TempDir Path tmp;

  private org.apache.hadoop.fs.Path dir() {
    return new org.apache.hadoop.fs.Path(tmp.toUri());
  }

  private Path lockFile() {
    return tmp.resolve(DirectoryLock.FILE);
  }

  /** A lock file as another process would have written it. */
  private void writeLock(String host, long pid, String processStart, Instant modified)
      throws Exception {
    ObjectNode holder = JSON.createObjectNode();
    holder.put("id", "someone-else");
    holder.put("user", "alice");
    holder.put("host", host);
    holder.put("pid", pid);
    holder.put("processStart", processStart);
    holder.put("since", "2026-01-01T00:00:00Z");
    holder.put("purpose", "preprocess");
    Files.write(lockFile(), JSON.writeValueAsBytes(holder));
    Files.setLastModifiedTime(lockFile(), FileTime.from(modified));
  }

  private static String thisHost() throws Exception {
    return java.net.InetAddress.getLocalHost().getHostName();
  }

  @Test
  void aSecondWriterFailsNamingTheHolderAndGetsInAfterRelease() throws Exception {
    try (DirectoryLock first = DirectoryLock.acquire(dir(), new Configuration(), "preprocess")) {
      var e =
          assertThrows(
              DirectoryLock.LockedException.class,
              () -> DirectoryLock.acquire(dir(), new Configuration(), "train"));
      String pid = Long.toString(ProcessHandle.current().pid());
      assertTrue(
          e.getMessage().contains("pid " + pid) && e.getMessage().contains("preprocess"),
          e.getMessage());
      first.checkHeld();
    }
    assertFalse(Files.exists(lockFile()), "released");
    DirectoryLock.acquire(dir(), new Configuration(), "train").close();
  }

  @Test
  void aLockOfAProcessThatIsGoneIsBroken() throws Exception {
    Process p = new ProcessBuilder("true").start();
    p.waitFor();
    writeLock(thisHost(), p.pid(), null, Instant.now());
    try (DirectoryLock lock = DirectoryLock.acquire(dir(), new Configuration(), "preprocess")) {
      lock.checkHeld();
      assertTrue(Files.readString(lockFile()).contains("\"pid\":" + ProcessHandle.current().pid()));
    }
    try (var files = Files.list(tmp)) {
      assertEquals(0, files.count(), "nothing left beside: the stale lock was removed");
    }
  }

  @Test
  void aLiveProcessHoldsItsLockHoweverOldItsHeartbeat() throws Exception {
    ProcessHandle self = ProcessHandle.current();
    writeLock(
        thisHost(),
        self.pid(),
        self.info().startInstant().orElseThrow().toString(),
        Instant.now().minus(Duration.ofDays(1)));
    assertThrows(
        DirectoryLock.LockedException.class,
        () -> DirectoryLock.acquire(dir(), new Configuration(), "preprocess"));
    assertTrue(Files.readString(lockFile()).contains("someone-else"), "left as it was");
  }

  @Test
  void aReusedPidDoesNotKeepADeadWritersLock() throws Exception {
    writeLock(thisHost(), ProcessHandle.current().pid(), "2001-01-01T00:00:00Z", Instant.now());
    DirectoryLock.acquire(dir(), new Configuration(), "preprocess").close();
  }

  @Test
  void anotherHostsLockIsStaleOnlyWithoutAHeartbeat() throws Exception {
    writeLock("elsewhere.example", 12345, null, Instant.now());
    assertThrows(
        DirectoryLock.LockedException.class,
        () -> DirectoryLock.acquire(dir(), new Configuration(), "preprocess"));
    writeLock("elsewhere.example", 12345, null, Instant.now().minus(Duration.ofMinutes(3)));
    DirectoryLock.acquire(dir(), new Configuration(), "preprocess").close();
  }

  @Test
  void anUnreadableLockIsHeldWhileFresh() throws Exception {
    Files.writeString(lockFile(), "{\"id\": \"damag");
    var e =
        assertThrows(
            DirectoryLock.LockedException.class,
            () -> DirectoryLock.acquire(dir(), new Configuration(), "preprocess"));
    assertTrue(e.getMessage().contains("unknown writer"), e.getMessage());
    Files.setLastModifiedTime(lockFile(), FileTime.from(Instant.now().minusSeconds(600)));
    DirectoryLock.acquire(dir(), new Configuration(), "preprocess").close();
  }

  /**
   * A writer killed between creating its (local) lock and writing into it leaves it empty: the next
   * writer gets in within a moment, instead of waiting out the heartbeat timeout.
   */
  @Test
  void anEmptyLocalLockOfAWriterKilledWhileCreatingItIsBrokenAtOnce() throws Exception {
    // A heartbeat timeout of a day: only the rule for empty local locks can break this one.
    Duration day = Duration.ofDays(1);
    Files.writeString(lockFile(), "");
    DirectoryLock.acquire(dir(), new Configuration(), "train", day).close();
    assertFalse(Files.exists(lockFile()), "released");
    // One that stayed empty past the grace is broken on the first look.
    Files.writeString(lockFile(), "");
    Files.setLastModifiedTime(
        lockFile(),
        FileTime.from(Instant.now().minus(DirectoryLock.EMPTY_LOCAL_GRACE.multipliedBy(2))));
    DirectoryLock.acquire(dir(), new Configuration(), "train", day).close();
    assertFalse(Files.exists(lockFile()), "released");
  }

  /** ...but one whose writer fills it a moment later is that writer's: waited for, then named. */
  @Test
  void anEmptyLocalLockBeingWrittenIsWaitedForAndItsWriterNamed() throws Exception {
    Files.writeString(lockFile(), "");
    Thread writer =
        new Thread(
            () -> {
              try {
                Thread.sleep(100);
                writeLock(thisHost(), ProcessHandle.current().pid(), null, Instant.now());
              } catch (Exception e) {
                throw new IllegalStateException(e);
              }
            });
    writer.start();
    var e =
        assertThrows(
            DirectoryLock.LockedException.class,
            () -> DirectoryLock.acquire(dir(), new Configuration(), "train"));
    writer.join();
    assertTrue(e.getMessage().contains("alice"), e.getMessage());
  }

  @Test
  void aLockTakenAwayIsNoticedBeforeCommitting() throws Exception {
    try (DirectoryLock lock = DirectoryLock.acquire(dir(), new Configuration(), "preprocess")) {
      writeLock("elsewhere.example", 1, null, Instant.now());
      var e = assertThrows(java.io.IOException.class, lock::checkHeld);
      assertTrue(e.getMessage().contains("lost the writer's lock"), e.getMessage());
    }
    assertTrue(Files.readString(lockFile()).contains("someone-else"), "not ours: not removed");
  }

  @Test
  void ofManyWritersStartingTogetherExactlyOneGetsIn() throws Exception {
    Process p = new ProcessBuilder("true").start();
    p.waitFor();
    for (int round = 0; round < 30; round++) {
      if (round % 2 == 1) {
        writeLock(thisHost(), p.pid(), null, Instant.now()); // all race to break a dead lock
      }
      int writers = 6;
      CountDownLatch start = new CountDownLatch(1);
      ExecutorService pool = Executors.newFixedThreadPool(writers);
      List<Future<DirectoryLock>> tries = new ArrayList<>();
      for (int w = 0; w < writers; w++) {
        tries.add(
            pool.submit(
                () -> {
                  start.await();
                  try {
                    return DirectoryLock.acquire(dir(), new Configuration(), "race");
                  } catch (DirectoryLock.LockedException e) {
                    return null;
                  }
                }));
      }
      start.countDown();
      List<DirectoryLock> held = new ArrayList<>();
      for (Future<DirectoryLock> f : tries) {
        DirectoryLock l = f.get();
        if (l != null) {
          held.add(l);
        }
      }
      pool.shutdown();
      assertEquals(1, held.size(), "round " + round);
      held.get(0).checkHeld();
      held.get(0).close();
      assertFalse(Files.exists(lockFile()));
    }
  }

  @Test
  void worksThroughTheHadoopApiOnAnotherFileSystem() throws Exception {
    Configuration conf = NonLocalFileSystemTest.conf();
    var other = new org.apache.hadoop.fs.Path("other://" + tmp);
    try (DirectoryLock lock = DirectoryLock.acquire(other, conf, "preprocess")) {
      assertThrows(
          DirectoryLock.LockedException.class, () -> DirectoryLock.acquire(other, conf, "again"));
      lock.checkHeld();
    }
    assertFalse(Files.exists(lockFile()));
  }
}
