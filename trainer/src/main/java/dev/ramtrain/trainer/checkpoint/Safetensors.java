package dev.ramtrain.trainer.checkpoint;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.ramtrain.console.Printable;
import dev.ramtrain.files.IoErrors;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The safetensors format (what {@code safetensors.torch.load_file} reads): an 8-byte little-endian
 * header length, a JSON header mapping each tensor name to its dtype, shape and byte range, and the
 * little-endian data. Only F32 tensors are written here; F32, F16, BF16 and I64 are read (a
 * pretrained checkpoint's dtypes), as float32.
 */
public final class Safetensors {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final long MAX_HEADER = 100L << 20;

  private Safetensors() {}

  /** What one write moves at a time: a few MiB of heap, not a second copy of the tensor. */
  private static final int CHUNK_FLOATS = 1 << 20;

  /** The most values one Java array holds (a little under 2^31, as the VM allows). */
  public static final int MAX_ARRAY = Integer.MAX_VALUE - 8;

  /**
   * A tensor's float32 values, read a piece at a time: an array, or a range of host memory or of a
   * file that no Java array could hold (ViT-H/14's optimizer state: 632 M values a slab), or that
   * the heap should not hold twice.
   */
  public interface Values {
    long count();

    /** Copies the values from {@code from} on into {@code into}, filling what remains of it. */
    void read(long from, FloatBuffer into);

    /** The values in one array: the array itself where they are one, else read into a new one. */
    default float[] toArray() {
      if (count() > MAX_ARRAY) {
        throw new IllegalStateException(count() + " values are more than one Java array holds");
      }
      float[] out = new float[(int) count()];
      read(0, FloatBuffer.wrap(out));
      return out;
    }

    static Values of(float[] values) {
      return new ArrayValues(values, 0, values.length);
    }

    /** Values [{@code offset}, {@code offset + count}) of {@code values}, not copied. */
    static Values of(float[] values, int offset, int count) {
      java.util.Objects.checkFromIndexSize(offset, count, values.length);
      return new ArrayValues(values, offset, count);
    }
  }

  private record ArrayValues(float[] array, int offset, int length) implements Values {
    @Override
    public long count() {
      return length;
    }

    @Override
    public void read(long from, FloatBuffer into) {
      if (from < 0 || from > length - into.remaining()) {
        throw new IndexOutOfBoundsException(
            "values [" + from + ", " + (from + into.remaining()) + ") of " + length);
      }
      into.put(array, offset + (int) from, into.remaining());
    }

    @Override
    public float[] toArray() {
      return offset == 0 && length == array.length
          ? array
          : java.util.Arrays.copyOfRange(array, offset, offset + length);
    }
  }

  /** A float32 tensor; its {@code data} an array or a source read as it is written. */
  public record Tensor(String name, long[] shape, Values data) {
    public Tensor {
      long n = 1;
      for (long d : shape) {
        n *= d;
      }
      if (n != data.count()) {
        throw new IllegalArgumentException(
            name + ": shape holds " + n + " values, got " + data.count());
      }
    }

    public Tensor(String name, long[] shape, float[] values) {
      this(name, shape, Values.of(values));
    }

    /**
     * The values in one array: the tensor's own where it holds one (not a copy), else read into a
     * new one.
     */
    public float[] values() {
      return data.toArray();
    }
  }

  /**
   * Writes {@code tensors} in order, with {@code metadata} in the header in key order, a few MiB at
   * a time: a tensor may pass 2 GiB, and a tensor read from host memory is never copied whole.
   */
  public static void write(Path file, List<Tensor> tensors, Map<String, String> metadata)
      throws IOException {
    ObjectNode header = JSON.createObjectNode();
    if (!metadata.isEmpty()) {
      ObjectNode meta = header.putObject("__metadata__");
      new TreeMap<>(metadata).forEach(meta::put);
    }
    long offset = 0;
    for (Tensor t : tensors) {
      ObjectNode entry = header.putObject(t.name());
      entry.put("dtype", "F32");
      var shape = entry.putArray("shape");
      for (long d : t.shape()) {
        shape.add(d);
      }
      long end = offset + 4L * t.data().count();
      entry.putArray("data_offsets").add(offset).add(end);
      offset = end;
    }
    byte[] json = JSON.writeValueAsBytes(header);
    int padded = (json.length + 7) / 8 * 8; // the data section starts 8-byte aligned
    ByteBuffer head = ByteBuffer.allocate(8 + padded).order(ByteOrder.LITTLE_ENDIAN);
    head.putLong(padded).put(json);
    while (head.hasRemaining()) {
      head.put((byte) ' ');
    }
    head.flip();
    try (FileChannel out =
        FileChannel.open(
            file,
            StandardOpenOption.CREATE,
            StandardOpenOption.TRUNCATE_EXISTING,
            StandardOpenOption.WRITE)) {
      writeFully(out, head);
      ByteBuffer chunk = ByteBuffer.allocateDirect(4 * CHUNK_FLOATS).order(ByteOrder.LITTLE_ENDIAN);
      for (Tensor t : tensors) {
        long n = t.data().count();
        for (long at = 0; at < n; at += CHUNK_FLOATS) {
          int length = (int) Math.min(CHUNK_FLOATS, n - at);
          chunk.clear().limit(4 * length);
          t.data().read(at, chunk.asFloatBuffer()); // the view keeps the chunk's byte order
          writeFully(out, chunk);
        }
      }
    } catch (IOException e) {
      throw IoErrors.writing(file, e);
    }
  }

  private static void writeFully(FileChannel out, ByteBuffer bytes) throws IOException {
    while (bytes.hasRemaining()) {
      out.write(bytes);
    }
  }

  /** Writes a small file whole, naming it when the write fails (a full disk, say). */
  public static void writeFile(Path file, byte[] bytes) throws IOException {
    try {
      Files.write(file, bytes);
    } catch (IOException e) {
      throw IoErrors.writing(file, e);
    }
  }

  /** The element types read, with their sizes in bytes. */
  private enum StoredType {
    F32(4),
    F16(2),
    BF16(2),
    I64(8);

    final int bytes;

    StoredType(int bytes) {
      this.bytes = bytes;
    }
  }

  /**
   * Reads every tensor (in file order, widened to float32) and the metadata. The file is untrusted:
   * its header is checked (lengths, shapes, and data ranges that lie inside the file without
   * overlapping) before anything is allocated, and every problem is an {@link IOException} naming
   * the file.
   */
  public static Map<String, Tensor> read(Path file, Map<String, String> metadataOut)
      throws IOException {
    return index(file, metadataOut).readAll();
  }

  /**
   * The file's header, checked as {@link #read} checks it, with the metadata: its tensors' values
   * are read only when asked for.
   */
  static StoredTensors index(Path file, Map<String, String> metadataOut) throws IOException {
    return checkedIndex(file, metadataOut);
  }

  /**
   * Every tensor of {@code file} (checked as {@link #read} checks it), in the file's order, its
   * values left in the file and read (widened to float32) as they are used: a checkpoint's weights
   * and optimizer state, which may pass what the heap holds.
   */
  public static Map<String, Tensor> readInPlace(Path file) throws IOException {
    return checkedIndex(file, new LinkedHashMap<>()).inPlace();
  }

  private static Index checkedIndex(Path file, Map<String, String> metadataOut) throws IOException {
    try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
      long size = ch.size();
      ByteBuffer lengthBytes = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
      if (size < 8 || readFully(ch, lengthBytes, 0) != 8) {
        throw new IOException(file + ": not a safetensors file (shorter than its header length)");
      }
      long headerLength = lengthBytes.getLong(0);
      if (headerLength <= 0 || headerLength > MAX_HEADER || 8 + headerLength > size) {
        throw new IOException(
            file
                + ": bad safetensors header length "
                + headerLength
                + " for a "
                + size
                + "-byte file");
      }
      ByteBuffer headerBytes = ByteBuffer.allocate((int) headerLength);
      readFully(ch, headerBytes, 8);
      JsonNode header = JSON.readTree(new String(headerBytes.array(), StandardCharsets.UTF_8));
      if (header == null || !header.isObject()) {
        throw new IOException(file + ": safetensors header is not a JSON object");
      }
      long dataStart = 8 + headerLength;
      List<Entry> entries = new ArrayList<>();
      for (Iterator<Map.Entry<String, JsonNode>> it = header.fields(); it.hasNext(); ) {
        Map.Entry<String, JsonNode> e = it.next();
        if (e.getKey().equals("__metadata__")) {
          e.getValue()
              .fields()
              .forEachRemaining(m -> metadataOut.put(m.getKey(), m.getValue().asText()));
          continue;
        }
        entries.add(entry(file, e.getKey(), e.getValue(), size - dataStart));
      }
      List<Entry> byOffset = new ArrayList<>(entries);
      byOffset.sort(Comparator.comparingLong(Entry::begin));
      long previousEnd = 0;
      for (Entry e : byOffset) {
        if (e.begin() < previousEnd) {
          throw new IOException(
              file + ": tensor " + Printable.name(e.name()) + " overlaps another one's data");
        }
        previousEnd = e.end();
      }
      return new Index(file, dataStart, entries);
    } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
      throw new IOException(
          file + ": safetensors header is not valid JSON: " + e.getOriginalMessage(), e);
    }
  }

  /** A checked header: where each tensor's bytes lie in {@code file}. */
  private record Index(Path file, long dataStart, List<Entry> entries) implements StoredTensors {
    @Override
    public Map<String, long[]> shapes() {
      Map<String, long[]> shapes = new LinkedHashMap<>();
      entries.forEach(e -> shapes.put(e.name(), e.shape().clone()));
      return shapes;
    }

    @Override
    public Map<String, float[]> read(java.util.Set<String> names) throws IOException {
      Map<String, float[]> values = new LinkedHashMap<>();
      try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
        ByteBuffer chunk =
            ByteBuffer.allocate(CHUNK_FLOATS * StoredType.I64.bytes).order(ByteOrder.LITTLE_ENDIAN);
        for (Entry e : entries) {
          if (!names.contains(e.name())) {
            continue;
          }
          long count = (e.end() - e.begin()) / e.dtype().bytes;
          if (count > MAX_ARRAY) {
            throw new IOException(
                file
                    + ": tensor "
                    + Printable.name(e.name())
                    + " has "
                    + count
                    + " values, more than one Java array holds");
          }
          float[] out = new float[(int) count];
          for (int at = 0; at < count; at += CHUNK_FLOATS) { // a few MiB at a time
            int length = (int) Math.min(CHUNK_FLOATS, count - at);
            chunk.clear().limit(length * e.dtype().bytes);
            long position = dataStart + e.begin() + (long) at * e.dtype().bytes;
            if (readFully(ch, chunk, position) != chunk.limit()) {
              throw new IOException(
                  file + ": tensor " + e.name() + " is cut short (truncated file?)");
            }
            chunk.flip();
            floats(e.dtype(), chunk, out, at);
          }
          values.put(e.name(), out);
        }
      }
      return values;
    }

    /** Every tensor, its values left in the file and read as they are used. */
    Map<String, Tensor> inPlace() {
      Map<String, Tensor> tensors = new LinkedHashMap<>();
      for (Entry e : entries) {
        long count = (e.end() - e.begin()) / e.dtype().bytes;
        tensors.put(
            e.name(),
            new Tensor(
                e.name(),
                e.shape().clone(),
                new FileValues(file, dataStart + e.begin(), count, e.dtype())));
      }
      return tensors;
    }
  }

  /**
   * {@code count} little-endian values of type {@code dtype} at {@code position} of {@code file},
   * read (widened to float32) when asked; the index checked that they lie inside the file.
   */
  private record FileValues(Path file, long position, long count, StoredType dtype)
      implements Values {
    @Override
    public void read(long from, FloatBuffer into) {
      int piece = Math.min(CHUNK_FLOATS, into.remaining());
      ByteBuffer chunk = ByteBuffer.allocate(dtype.bytes * piece).order(ByteOrder.LITTLE_ENDIAN);
      float[] widened = dtype == StoredType.F32 ? null : new float[piece];
      try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
        long at = from;
        while (into.hasRemaining()) {
          int n = Math.min(piece, into.remaining());
          chunk.clear().limit(dtype.bytes * n);
          if (readFully(ch, chunk, position + dtype.bytes * at) != chunk.limit()) {
            throw new IOException(file + ": cut short while it was read (truncated file?)");
          }
          chunk.flip();
          at += n;
          if (widened == null) {
            into.put(chunk.asFloatBuffer());
          } else {
            floats(dtype, chunk, widened, 0);
            into.put(widened, 0, n);
          }
        }
      } catch (IOException e) {
        throw new java.io.UncheckedIOException(file + ": " + e.getMessage(), e);
      }
    }
  }

  /** Widens {@code data}'s values of type {@code dtype} into {@code out} from {@code at} on. */
  private static void floats(StoredType dtype, ByteBuffer data, float[] out, int at) {
    int n = data.remaining() / dtype.bytes;
    switch (dtype) {
      case F32 -> data.asFloatBuffer().get(out, at, n);
      case F16 -> {
        for (int i = 0; i < n; i++) {
          out[at + i] = halfToFloat(data.getShort(2 * i));
        }
      }
      case BF16 -> {
        for (int i = 0; i < n; i++) {
          out[at + i] = Float.intBitsToFloat((data.getShort(2 * i) & 0xFFFF) << 16);
        }
      }
      case I64 -> {
        for (int i = 0; i < n; i++) {
          out[at + i] = data.getLong(8 * i);
        }
      }
    }
  }

  /** IEEE binary16 to float32, exactly (Java 17 has no Float.float16ToFloat). */
  static float halfToFloat(short half) {
    int bits = half & 0xFFFF;
    int sign = (bits & 0x8000) << 16;
    int exponent = (bits >>> 10) & 0x1F;
    int mantissa = bits & 0x3FF;
    if (exponent == 0x1F) { // infinity or NaN, payload kept
      return Float.intBitsToFloat(sign | 0x7F800000 | (mantissa << 13));
    }
    if (exponent == 0) { // zero or subnormal: mantissa · 2^-24
      float magnitude = mantissa * 0x1p-24f;
      return sign != 0 ? -magnitude : magnitude;
    }
    return Float.intBitsToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
  }

  /** One tensor's header entry, checked. */
  private record Entry(String name, StoredType dtype, long[] shape, long begin, long end) {}

  private static Entry entry(Path file, String name, JsonNode entry, long dataBytes)
      throws IOException {
    String where = file + ": tensor " + Printable.name(name);
    StoredType dtype;
    try {
      dtype = StoredType.valueOf(entry.path("dtype").asText(""));
    } catch (IllegalArgumentException e) {
      throw new IOException(
          where
              + " is "
              + entry.path("dtype").asText("not a tensor")
              + "; F32, F16, BF16 and I64 are read");
    }
    JsonNode dims = entry.path("shape");
    if (!dims.isArray() || dims.size() > 8) {
      throw new IOException(where + " has no shape of at most 8 dimensions");
    }
    long[] shape = new long[dims.size()];
    long count = 1;
    for (int i = 0; i < shape.length; i++) {
      JsonNode d = dims.get(i);
      if (!d.canConvertToLong() || !d.isIntegralNumber() || d.asLong() < 0) {
        throw new IOException(where + " has a bad dimension " + d);
      }
      shape[i] = d.asLong();
      if (count != 0 && shape[i] > Integer.MAX_VALUE / count) {
        throw new IOException(where + " has an impossible shape " + dims);
      }
      count *= shape[i];
    }
    JsonNode offsets = entry.path("data_offsets");
    long begin = offsets.path(0).isIntegralNumber() ? offsets.path(0).asLong() : -1;
    long end = offsets.path(1).isIntegralNumber() ? offsets.path(1).asLong() : -1;
    if (offsets.size() != 2 || begin < 0 || end < begin || end > dataBytes) {
      throw new IOException(
          where
              + " has bad data offsets "
              + offsets
              + " for "
              + dataBytes
              + " data bytes (truncated file?)");
    }
    if (end - begin != dtype.bytes * count) {
      throw new IOException(
          where
              + " holds "
              + (end - begin)
              + " bytes, its shape "
              + dims
              + " of "
              + dtype
              + " needs "
              + dtype.bytes * count);
    }
    // No limit here on the size: read is a piece at a time (and an array holds at most MAX_ARRAY
    // values, checked there); read in place, a tensor may pass 2 GiB (a large model's state).
    return new Entry(name, dtype, shape, begin, end);
  }

  private static int readFully(FileChannel ch, ByteBuffer into, long position) throws IOException {
    int total = 0;
    while (into.hasRemaining()) {
      int n = ch.read(into, position + total);
      if (n < 0) {
        break;
      }
      total += n;
    }
    return total;
  }
}
