package dev.ramtrain.trainer;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ramtrain.files.IoErrors;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Map;

/** Metrics as JSON lines (one record per step interval or epoch); a null path discards them. */
public final class MetricsLog implements AutoCloseable {
  private static final ObjectMapper JSON = new ObjectMapper();
  private final Path file;
  private final BufferedWriter out;

  /** A new metrics file (an existing one is replaced). */
  public MetricsLog(Path file) throws IOException {
    this(file, false);
  }

  /** Metrics written to {@code file}, after what it holds when {@code append}. */
  public MetricsLog(Path file, boolean append) throws IOException {
    this.file = file;
    if (file != null && file.toAbsolutePath().getParent() != null) {
      Files.createDirectories(file.toAbsolutePath().getParent());
    }
    this.out =
        file == null
            ? null
            : append
                ? Files.newBufferedWriter(
                    file,
                    StandardCharsets.UTF_8,
                    StandardOpenOption.CREATE,
                    StandardOpenOption.APPEND)
                : Files.newBufferedWriter(file, StandardCharsets.UTF_8);
  }

  public void write(Map<String, Object> record) {
    if (out == null) {
      return;
    }
    try {
      out.write(JSON.writeValueAsString(record));
      out.newLine();
      out.flush();
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException("metrics record is not JSON: " + record, e);
    } catch (IOException e) {
      throw new UncheckedIOException(IoErrors.writing(file, e));
    }
  }

  @Override
  public void close() throws IOException {
    if (out != null) {
      out.close();
    }
  }
}
