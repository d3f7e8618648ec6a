package dev.ramtrain.trainer.checkpoint;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.zip.ZipFile;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * PyTorch's own {@code .pth} state dicts (fixtures torch.save wrote, see make_goldens.py): read as
 * the safetensors copy of the same weights reads, every dtype and strided view; and hostile ones (a
 * pickle that runs a shell command, another class's {@code __reduce__}, a storage claiming 4 TB, a
 * truncated archive, random damage to the pickle) refused with an IOException naming the file
 * before anything runs or is allocated.
 */
class TorchArchiveTest {
  private static final Path EXECUTED = Path.of("/tmp/ramtrain-pickle-executed");

  static Path fixture(String name) {
    return PretrainedWeightsTest.resource(name);
  }

  @Test
  void aPthReadsAsTheSafetensorsOfTheSameWeights() throws IOException {
    Map<String, Safetensors.Tensor> pth = TorchArchive.read(fixture("vit_tiny_torchvision.pth"));
    Map<String, Safetensors.Tensor> st =
        Safetensors.read(fixture("vit_tiny_torchvision.weights.safetensors"), new HashMap<>());
    assertEquals(st.keySet(), pth.keySet());
    for (String name : st.keySet()) {
      assertArrayEquals(st.get(name).shape(), pth.get(name).shape(), name);
      assertArrayEquals(st.get(name).values(), pth.get(name).values(), name);
    }
    assertEquals(
        "torchvision", PretrainedWeights.read(fixture("vit_tiny_torchvision.pth")).naming());
  }

  @Test
  void everyDtypeAndStridedViewsAndAModulesMetadata() throws IOException {
    Map<String, Safetensors.Tensor> t = TorchArchive.read(fixture("dtypes.pth"));
    assertArrayEquals(new long[] {2, 3}, t.get("0.weight").shape());
    assertArrayEquals(new float[] {1.5f, -2f, 65504f}, t.get("half").values());
    assertArrayEquals(new float[] {1.5f, -3.140625f}, t.get("bf16").values());
    assertArrayEquals(new float[] {12345f}, t.get("count").values());
    assertArrayEquals(new long[] {}, t.get("count").shape());
    // arange(6).reshape(2, 3).t(): [[0, 3], [1, 4], [2, 5]], a stride-(1, 3) view
    assertArrayEquals(new long[] {3, 2}, t.get("transposed").shape());
    assertArrayEquals(new float[] {0, 3, 1, 4, 2, 5}, t.get("transposed").values());
    // arange(10)[2:8:2]: offset 2, stride 2
    assertArrayEquals(new float[] {2, 4, 6}, t.get("sliced").values());
  }

  @Test
  void aPickleThatRunsACommandIsRefusedBeforeAnythingRuns() throws IOException {
    Files.deleteIfExists(EXECUTED);
    var e =
        assertThrows(
            IOException.class, () -> PretrainedWeights.read(fixture("hostile_system.pth")));
    assertTrue(e.getMessage().contains("asks for posix.system"), e.getMessage());
    assertTrue(e.getMessage().contains("refused before running anything"), e.getMessage());
    assertTrue(e.getMessage().startsWith(fixture("hostile_system.pth").toString()));
    assertEquals(1, e.getMessage().lines().count());
    assertFalse(Files.exists(EXECUTED), "the command did not run");
    var reduce =
        assertThrows(IOException.class, () -> TorchArchive.read(fixture("hostile_reduce.pth")));
    assertTrue(reduce.getMessage().contains("asks for collections.Counter"), reduce.getMessage());
  }

  @Test
  void aStorageLargerThanItsEntryIsRefusedBeforeItIsAllocated() {
    var e = assertThrows(IOException.class, () -> TorchArchive.read(fixture("hostile_huge.pth")));
    assertTrue(e.getMessage().contains("a storage of 1000000000000 elements"), e.getMessage());
  }

  /**
   * The legacy torch.save format (a bare pickle starting with torch's magic number, protocol 2 as
   * torch writes it by default, or 4 after a FRAME) is named as such with how to save it again; it
   * was called "bad safetensors header length".
   */
  @Test
  void aLegacyTorchSaveFileIsNamedWithHowToSaveItAgain(@TempDir Path dir) throws IOException {
    byte[] magic = {
      0x6c, (byte) 0xfc, (byte) 0x9c, 0x46, (byte) 0xf9, 0x20, 0x6a, (byte) 0xa8, 0x50, 0x19
    };
    java.io.ByteArrayOutputStream two = new java.io.ByteArrayOutputStream();
    two.write(new byte[] {(byte) 0x80, 2, (byte) 0x8a, 10});
    two.write(magic);
    two.write(new byte[] {'.', (byte) 0x80, 2, 'K', 3, '.'}); // the magic, then a protocol version
    java.io.ByteArrayOutputStream four = new java.io.ByteArrayOutputStream();
    four.write(new byte[] {(byte) 0x80, 4, (byte) 0x95, 13, 0, 0, 0, 0, 0, 0, 0, (byte) 0x8a, 10});
    four.write(magic);
    four.write('.');
    for (byte[] bytes : List.of(two.toByteArray(), four.toByteArray())) {
      Path old = dir.resolve("old-" + bytes[1] + ".pth");
      Files.write(old, bytes);
      var e = assertThrows(IOException.class, () -> PretrainedWeights.read(old));
      assertEquals(
          old
              + ": a torch.save file of the legacy format (PyTorch before 1.6, or"
              + " _use_new_zipfile_serialization=False), which is not read; save it again in"
              + " PyTorch as torch.save(torch.load(f, weights_only=True), 'new.pth'), or as"
              + " safetensors",
          e.getMessage());
    }
  }

  @Test
  void aTruncatedArchiveIsRefusedNamingIt(@TempDir Path dir) throws IOException {
    byte[] whole = Files.readAllBytes(fixture("vit_tiny_torchvision.pth"));
    for (int keep : new int[] {whole.length - 10, whole.length / 2, 100}) {
      Path cut = dir.resolve("cut-" + keep + ".pth");
      Files.write(cut, Arrays.copyOf(whole, keep));
      var e = assertThrows(IOException.class, () -> PretrainedWeights.read(cut));
      assertTrue(e.getMessage().startsWith(cut.toString()), e.getMessage());
    }
  }

  /**
   * A dict key nested 100,000 tuples deep, or a dict that is its own key, overflowed the stack when
   * the key was hashed: refused as a key no state dict has, before it is hashed.
   */
  @Test
  void containerKeysAreRefusedBeforeTheyAreHashed() {
    java.io.ByteArrayOutputStream deep = new java.io.ByteArrayOutputStream();
    deep.write(0x80);
    deep.write(2); // PROTO 2
    deep.write('}'); // EMPTY_DICT
    deep.write(')'); // EMPTY_TUPLE
    for (int i = 0; i < 100_000; i++) {
      deep.write(0x85); // TUPLE1: the one before, wrapped (no MARK, so no mark depth to bound)
    }
    deep.write('N'); // the value
    deep.write('s'); // SETITEM
    deep.write('.'); // STOP
    var e = assertThrows(IOException.class, () -> StateDictPickle.read("deep", deep.toByteArray()));
    assertTrue(e.getMessage().startsWith("deep: "), e.getMessage());
    assertTrue(e.getMessage().contains("a dict key that is a"), e.getMessage());
    byte[] itself = {
      (byte) 0x80,
      2,
      '}',
      'q',
      0, // EMPTY_DICT, memoized as 0
      'h',
      0,
      'N',
      's',
      '.' // its own key: SETITEM(dict, dict, None)
    };
    var self = assertThrows(IOException.class, () -> StateDictPickle.read("self", itself));
    assertTrue(self.getMessage().contains("a dict key that is a"), self.getMessage());
  }

  /**
   * Random damage to a real state dict's pickle (flipped bytes, cut ends, spliced runs): every
   * outcome is a state dict or an IOException naming the file; never another exception, a hang or
   * an allocation the bytes did not justify.
   */
  @Test
  void damagedPicklesFailCleanly() throws IOException {
    byte[] pickle;
    try (ZipFile zip = new ZipFile(fixture("dtypes.pth").toFile())) {
      pickle = zip.getInputStream(zip.getEntry("dtypes/data.pkl")).readAllBytes();
    }
    Random rng = new Random(26);
    int parsed = 0;
    for (int round = 0; round < 3000; round++) {
      byte[] damaged = pickle.clone();
      switch (round % 3) {
        case 0 -> {
          for (int k = 0; k <= rng.nextInt(4); k++) {
            damaged[rng.nextInt(damaged.length)] = (byte) rng.nextInt(256);
          }
        }
        case 1 -> damaged = Arrays.copyOf(damaged, rng.nextInt(damaged.length));
        default -> {
          int from = rng.nextInt(damaged.length);
          int to = rng.nextInt(damaged.length);
          int n = rng.nextInt(Math.min(16, damaged.length - Math.max(from, to)) + 1);
          System.arraycopy(pickle, from, damaged, to, n);
        }
      }
      try {
        StateDictPickle.read("fuzz", damaged);
        parsed++;
      } catch (IOException e) {
        assertTrue(e.getMessage().startsWith("fuzz: "), e.getMessage());
      }
    }
    assertTrue(parsed < 3000, "the damage was seen");
  }
}
