package dev.ramtrain.trainer.checkpoint;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The safetensors format (what {@code safetensors.torch.load_file} reads): an 8-byte little-endian
 * header length, a JSON header mapping each tensor name to its dtype, shape and byte range, and the
 * little-endian data. Only F32 tensors are written here.
 */
public final class Safetensors {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final long MAX_HEADER = 100L << 20;

  private Safetensors() {}

  /** A float32 tensor. */
  public record Tensor(String name, long[] shape, float[] values) {
    public Tensor {
      long n = 1;
      for (long d : shape) {
        n *= d;
      }
      if (n != values.length) {
        throw new IllegalArgumentException(
            name + ": shape holds " + n + " values, got " + values.length);
      }
    }
  }

  public static void write(Path file, List<Tensor> tensors, Map<String, String> metadata)
      throws IOException {
    ObjectNode header = JSON.createObjectNode();
    if (!metadata.isEmpty()) {
      ObjectNode meta = header.putObject("__metadata__");
      metadata.forEach(meta::put);
    }
    long offset = 0;
    for (Tensor t : tensors) {
      ObjectNode entry = header.putObject(t.name());
      entry.put("dtype", "F32");
      var shape = entry.putArray("shape");
      for (long d : t.shape()) {
        shape.add(d);
      }
      long end = offset + 4L * t.values().length;
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
    try (OutputStream out = Files.newOutputStream(file)) {
      out.write(head.array());
      for (Tensor t : tensors) {
        ByteBuffer data = ByteBuffer.allocate(4 * t.values().length).order(ByteOrder.LITTLE_ENDIAN);
        data.asFloatBuffer().put(t.values());
        out.write(data.array());
      }
    }
  }

  /** Reads every F32 tensor (in file order) and the metadata; the file is named in errors. */
  public static Map<String, Tensor> read(Path file, Map<String, String> metadataOut)
      throws IOException {
    try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
      long size = ch.size();
      ByteBuffer lengthBytes = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
      if (size < 8 || ch.read(lengthBytes, 0) != 8) {
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
      ch.read(headerBytes, 8);
      JsonNode header = JSON.readTree(new String(headerBytes.array(), StandardCharsets.UTF_8));
      long dataStart = 8 + headerLength;
      Map<String, Tensor> tensors = new LinkedHashMap<>();
      for (Iterator<Map.Entry<String, JsonNode>> it = header.fields(); it.hasNext(); ) {
        Map.Entry<String, JsonNode> e = it.next();
        if (e.getKey().equals("__metadata__")) {
          e.getValue()
              .fields()
              .forEachRemaining(m -> metadataOut.put(m.getKey(), m.getValue().asText()));
          continue;
        }
        JsonNode entry = e.getValue();
        if (!"F32".equals(entry.path("dtype").asText())) {
          throw new IOException(
              file
                  + ": tensor "
                  + e.getKey()
                  + " is "
                  + entry.path("dtype").asText()
                  + "; only F32 is read");
        }
        List<Long> shape = new ArrayList<>();
        entry.path("shape").forEach(d -> shape.add(d.asLong()));
        long begin = entry.path("data_offsets").path(0).asLong(-1);
        long end = entry.path("data_offsets").path(1).asLong(-1);
        if (begin < 0 || end < begin || dataStart + end > size || (end - begin) % 4 != 0) {
          throw new IOException(
              file
                  + ": tensor "
                  + e.getKey()
                  + " has bad data offsets ["
                  + begin
                  + ", "
                  + end
                  + ") (truncated file?)");
        }
        ByteBuffer data = ByteBuffer.allocate((int) (end - begin)).order(ByteOrder.LITTLE_ENDIAN);
        ch.read(data, dataStart + begin);
        data.flip();
        float[] values = new float[(int) ((end - begin) / 4)];
        data.asFloatBuffer().get(values);
        tensors.put(
            e.getKey(),
            new Tensor(e.getKey(), shape.stream().mapToLong(Long::longValue).toArray(), values));
      }
      return tensors;
    } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
      throw new IOException(file + ": safetensors header is not valid JSON", e);
    }
  }
}
