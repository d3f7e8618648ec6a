package dev.ramtrain.trainer.checkpoint;

import dev.ramtrain.console.Printable;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Enumeration;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.zip.ZipEntry;
import java.util.zip.ZipException;
import java.util.zip.ZipFile;

/**
 * A PyTorch {@code .pth}/{@code .pt} state dict as {@code torch.save} writes it: a zip archive of
 * {@code NAME/data.pkl} (the dict, read by {@link StateDictPickle}) and one entry per storage
 * ({@code NAME/data/KEY}, little-endian unless {@code NAME/byteorder} says otherwise). Untrusted: a
 * storage's size is checked against its entry's before it is read, and every tensor's strided view
 * against its storage, so a hostile file fails with an error naming it, never allocates what it
 * claims.
 */
final class TorchArchive {
  private static final long MAX_PICKLE = 64L << 20;
  // The most one entry may hold: a Java array's length (the JDK reserves a few header words).
  private static final long MAX_ENTRY = Integer.MAX_VALUE - 8;
  // How many times over a file's tensors may read its storages (a tied weight reads one twice).
  private static final long MAX_REPEATS = 4;

  private TorchArchive() {}

  /**
   * Whether {@code head} (a file's first 16 bytes) starts the legacy torch.save format: a pickle
   * (protocol 2 by default; from 4 on, after a FRAME) whose first value is torch's magic number as
   * a 10-byte LONG1.
   */
  static boolean isLegacy(byte[] head) {
    if (head.length < 4 || (head[0] & 0xFF) != 0x80 || head[1] < 2 || head[1] > 5) {
      return false;
    }
    int at = (head[2] & 0xFF) == 0x95 ? 11 : 2; // PROTO, then FRAME and its 8-byte length
    return head.length >= at + 2 && (head[at] & 0xFF) == 0x8a && head[at + 1] == 10;
  }

  /** Whether {@code head} (a file's first bytes) starts a zip archive. */
  static boolean isZip(byte[] head) {
    return head.length >= 4 && head[0] == 'P' && head[1] == 'K' && head[2] == 3 && head[3] == 4;
  }

  /** Every tensor of the archive, in the pickle's order, widened to float32. */
  static Map<String, Safetensors.Tensor> read(Path file) throws IOException {
    return index(file).readAll();
  }

  /**
   * The archive's state dict as its pickle describes it (names, views over storages): the storages
   * are read only for the tensors asked for.
   */
  static StoredTensors index(Path file) throws IOException {
    try (ZipFile zip = new ZipFile(file.toFile())) {
      String prefix = null;
      for (Enumeration<? extends ZipEntry> e = zip.entries(); e.hasMoreElements(); ) {
        String name = e.nextElement().getName();
        if (name.endsWith("/data.pkl") && name.indexOf('/') == name.length() - 9) {
          if (prefix != null) {
            throw new IOException(file + ": two data.pkl in one archive");
          }
          prefix = name.substring(0, name.length() - "data.pkl".length());
        }
      }
      if (prefix == null) {
        throw new IOException(file + ": a zip archive without data.pkl is not a torch.save file");
      }
      ByteOrder order = byteOrder(zip, prefix, file);
      byte[] pickle = entry(zip, prefix + "data.pkl", MAX_PICKLE, file);
      Map<String, StateDictPickle.TensorView> views =
          StateDictPickle.read(file + " (" + prefix + "data.pkl)", pickle);
      return new Index(file, prefix, order, views);
    } catch (ZipException e) {
      throw new IOException(file + ": not a readable zip archive (" + e.getMessage() + ")", e);
    }
  }

  /** The pickle's views; the archive is opened again to read the storages asked for. */
  private record Index(
      Path file, String prefix, ByteOrder order, Map<String, StateDictPickle.TensorView> views)
      implements StoredTensors {
    @Override
    public Map<String, long[]> shapes() {
      Map<String, long[]> shapes = new LinkedHashMap<>();
      views.forEach((name, v) -> shapes.put(name, v.size().clone()));
      return shapes;
    }

    @Override
    public Map<String, float[]> read(Set<String> names) throws IOException {
      try (ZipFile zip = new ZipFile(file.toFile())) {
        Map<String, float[]> values = new LinkedHashMap<>();
        Map<String, ByteBuffer> storages = new LinkedHashMap<>();
        // A storage's bytes are dropped once its last view asked for is read: the file's raw bytes
        // and its float32 tensors are never all on the heap at once (a ViT-L's 1.2 GB would be
        // 2.4 GB).
        Map<String, Integer> viewsLeft = new HashMap<>();
        views.forEach(
            (name, v) -> {
              if (names.contains(name)) {
                viewsLeft.merge(v.storage().key(), 1, Integer::sum);
              }
            });
        long storageElements = 0;
        long viewElements = 0;
        for (Map.Entry<String, StateDictPickle.TensorView> v : views.entrySet()) {
          if (!names.contains(v.getKey())) {
            continue;
          }
          StateDictPickle.Storage s = v.getValue().storage();
          ByteBuffer data = storages.get(s.key());
          if (data == null) {
            data = storage(zip, s);
            storages.put(s.key(), data);
            storageElements += s.numel();
          }
          float[] t = tensor(file, v.getKey(), v.getValue(), data);
          viewElements += t.length;
          if (viewElements > MAX_REPEATS * storageElements) {
            // views may share a storage (tied weights), never many times over: memory stays
            // bounded
            throw new IOException(
                file
                    + ": its tensors read "
                    + viewElements
                    + "+ elements from storages of "
                    + storageElements
                    + ": more than "
                    + MAX_REPEATS
                    + " times what the file holds");
          }
          values.put(v.getKey(), t);
          if (viewsLeft.merge(s.key(), -1, Integer::sum) == 0) {
            storages.remove(s.key());
          }
        }
        return values;
      } catch (ZipException e) {
        throw new IOException(file + ": not a readable zip archive (" + e.getMessage() + ")", e);
      }
    }

    /** A storage's entry, checked to hold exactly its elements. */
    private ByteBuffer storage(ZipFile zip, StateDictPickle.Storage s) throws IOException {
      long size = storageBytes(file, s, elementBytes(s.type()));
      ByteBuffer data =
          ByteBuffer.wrap(entry(zip, prefix + "data/" + s.key(), size, file)).order(order);
      if (data.capacity() != size) {
        throw new IOException(
            file
                + ": storage "
                + Printable.name(s.key())
                + " holds "
                + data.capacity()
                + " bytes, its "
                + s.numel()
                + " "
                + s.type()
                + " elements need "
                + size);
      }
      return data;
    }
  }

  private static ByteOrder byteOrder(ZipFile zip, String prefix, Path file) throws IOException {
    ZipEntry e = zip.getEntry(prefix + "byteorder");
    if (e == null) {
      return ByteOrder.LITTLE_ENDIAN;
    }
    String text = new String(entry(zip, e.getName(), 16, file), StandardCharsets.US_ASCII).strip();
    return text.equals("big") ? ByteOrder.BIG_ENDIAN : ByteOrder.LITTLE_ENDIAN;
  }

  /** An entry's bytes, refused when the archive says it is larger than {@code limit}. */
  private static byte[] entry(ZipFile zip, String name, long limit, Path file) throws IOException {
    ZipEntry e = zip.getEntry(name);
    if (e == null) {
      throw new IOException(file + ": no entry " + Printable.name(name));
    }
    if (e.getMethod() != ZipEntry.STORED) {
      // torch.save stores every entry as it is; a compressed one could inflate far past its file
      throw new IOException(
          file
              + ": entry "
              + Printable.name(name)
              + " is compressed, which torch.save never does (save the weights again with"
              + " torch.save)");
    }
    if (e.getSize() < 0 || e.getSize() > Math.min(limit, MAX_ENTRY)) {
      throw new IOException(
          file
              + ": entry "
              + Printable.name(name)
              + " is "
              + e.getSize()
              + " bytes, at most "
              + limit
              + " expected");
    }
    try (InputStream in = zip.getInputStream(e)) {
      byte[] bytes = in.readNBytes((int) e.getSize());
      if (bytes.length != e.getSize()) {
        throw new IOException(file + ": entry " + Printable.name(name) + " is truncated");
      }
      return bytes;
    }
  }

  /** A storage's bytes, at most what one Java array holds. */
  private static long storageBytes(Path file, StateDictPickle.Storage s, int elementBytes)
      throws IOException {
    if (s.numel() < 0 || s.numel() > MAX_ENTRY / elementBytes) {
      throw new IOException(
          file
              + ": storage "
              + Printable.name(s.key())
              + " claims "
              + s.numel()
              + " elements; at most "
              + MAX_ENTRY / elementBytes
              + " are read in one piece");
    }
    return s.numel() * elementBytes;
  }

  private static int elementBytes(String type) throws IOException {
    return switch (type) {
      case "FloatStorage" -> 4;
      case "HalfStorage", "BFloat16Storage" -> 2;
      case "LongStorage", "DoubleStorage" -> 8;
      default -> throw new IOException("storage type " + type);
    };
  }

  /**
   * The view's elements in row-major order, widened to float32. A view never holds more elements
   * than its storage: a weight is no expansion (stride 0), and so what a file makes on the heap is
   * bounded by what it holds (a 5.8 KB file once asked for 5.6 GB); sizes, strides and offset are
   * checked without overflow before anything is allocated.
   */
  private static float[] tensor(
      Path file, String name, StateDictPickle.TensorView v, ByteBuffer data) throws IOException {
    long count = 1;
    long last = v.offset();
    try {
      if (v.offset() < 0) {
        throw new ArithmeticException("offset " + v.offset());
      }
      for (int d = 0; d < v.size().length; d++) {
        if (v.size()[d] < 0 || v.stride()[d] < 0) {
          throw new ArithmeticException("size " + v.size()[d] + ", stride " + v.stride()[d]);
        }
        count = Math.multiplyExact(count, v.size()[d]);
        if (v.size()[d] > 0) {
          last = Math.addExact(last, Math.multiplyExact(v.size()[d] - 1, v.stride()[d]));
        }
      }
    } catch (ArithmeticException e) {
      throw new IOException(
          file
              + ": tensor "
              + Printable.name(name)
              + " has an impossible view ("
              + e.getMessage()
              + ")",
          e);
    }
    if (count > v.storage().numel()) {
      throw new IOException(
          file
              + ": tensor "
              + Printable.name(name)
              + " has "
              + count
              + " elements from a storage of "
              + v.storage().numel()
              + " (an expanded view, not a weight)");
    }
    if (count > 0 && last >= v.storage().numel()) {
      throw new IOException(
          file
              + ": tensor "
              + Printable.name(name)
              + " reaches element "
              + last
              + " of a storage of "
              + v.storage().numel());
    }
    float[] values = new float[Math.toIntExact(count)];
    int dims = v.size().length;
    long[] index = new long[dims];
    for (int i = 0; i < values.length; i++) {
      long at = v.offset();
      for (int d = 0; d < dims; d++) {
        at += index[d] * v.stride()[d];
      }
      values[i] = element(v.storage().type(), data, (int) at);
      for (int d = dims - 1; d >= 0; d--) { // the next index, last dimension fastest
        if (++index[d] < v.size()[d]) {
          break;
        }
        index[d] = 0;
      }
    }
    return values;
  }

  private static float element(String type, ByteBuffer data, int at) {
    return switch (type) {
      case "FloatStorage" -> data.getFloat(4 * at);
      case "HalfStorage" -> Safetensors.halfToFloat(data.getShort(2 * at));
      case "BFloat16Storage" -> Float.intBitsToFloat((data.getShort(2 * at) & 0xFFFF) << 16);
      case "LongStorage" -> data.getLong(8 * at);
      default -> (float) data.getDouble(8 * at);
    };
  }
}
