package dev.ramtrain.trainer.checkpoint;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import dev.ramtrain.files.PausePoints;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.nn.Model;
import dev.ramtrain.trainer.nn.Parameters;
import dev.ramtrain.trainer.optim.Optimizer;
import java.io.IOException;
import java.nio.FloatBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * Checkpoints of a run directory: {@code checkpoints/epoch-NNNN/} holds {@code model.safetensors}
 * (parameters by their PyTorch-style names, loadable by {@code safetensors.torch.load_file}),
 * {@code optimizer.safetensors} (its state slabs), with {@code --ema} {@code model_ema.safetensors}
 * (the moving average of the same tensors, timm's {@code state_dict_ema}) and {@code state.json}
 * (epochs done, step, settings that evaluation and prediction need). A checkpoint is written into a
 * temporary folder, renamed into place, and only then named by {@code checkpoints/latest}: a
 * process killed at any instant leaves {@code latest} naming a whole checkpoint. The same state
 * saves to the same bytes (keys in a fixed order, no timestamps), so checkpoints can be compared by
 * their hashes.
 */
public final class Checkpoints {
  // Keys sorted: two runs that save the same state write the same bytes.
  private static final ObjectMapper JSON =
      new ObjectMapper()
          .enable(SerializationFeature.INDENT_OUTPUT)
          .enable(SerializationFeature.ORDER_MAP_ENTRIES_BY_KEYS);
  public static final String LATEST = "latest";
  public static final String BEST = "best";

  /** The moving average of the weights ({@code --ema}), beside {@code model.safetensors}. */
  public static final String AVERAGED = "model_ema.safetensors";

  /** The files of every checkpoint folder, written by {@link #save} ({@link #AVERAGED} besides). */
  public static final List<String> FILES =
      List.of("model.safetensors", "optimizer.safetensors", "state.json");

  private Checkpoints() {}

  /** What a checkpoint holds, read back. */
  public record Loaded(
      Path dir,
      Map<String, Object> state,
      Map<String, Safetensors.Tensor> weights,
      List<Safetensors.Values> optimizerState,
      Map<String, Safetensors.Tensor> averaged) {
    /** A checkpoint without a moving average. */
    public Loaded(
        Path dir,
        Map<String, Object> state,
        Map<String, Safetensors.Tensor> weights,
        List<Safetensors.Values> optimizerState) {
      this(dir, state, weights, optimizerState, Map.of());
    }

    /**
     * The same checkpoint with its optimizer state read into arrays: {@link #load} leaves it in the
     * file, read as the optimizer takes it back, which a checkpoint whose files are deleted first
     * (a remote run's local copy) cannot do.
     */
    public Loaded inMemory() {
      List<Safetensors.Values> read =
          optimizerState.stream().map(v -> Safetensors.Values.of(v.toArray())).toList();
      return new Loaded(dir, state, inMemory(weights), read, inMemory(averaged));
    }

    private static Map<String, Safetensors.Tensor> inMemory(Map<String, Safetensors.Tensor> in) {
      Map<String, Safetensors.Tensor> out = new LinkedHashMap<>();
      in.forEach((name, t) -> out.put(name, new Safetensors.Tensor(name, t.shape(), t.values())));
      return out;
    }

    /** The same checkpoint with its moving average as its weights ({@code evaluate --ema}). */
    public Loaded averagedAsWeights() {
      if (averaged.isEmpty()) {
        throw new IllegalArgumentException(
            dir + " has no " + AVERAGED + ": the run was not trained with --ema");
      }
      return new Loaded(dir, state, averaged, optimizerState, Map.of());
    }

    public int epochsDone() {
      return ((Number) state.get("epochs_done")).intValue();
    }

    public long globalStep() {
      return ((Number) state.get("global_step")).longValue();
    }

    public int optimizerSteps() {
      return ((Number) state.get("optimizer_steps")).intValue();
    }
  }

  /**
   * What a checkpoint saves of a model and its optimizer: parameters and buffers by name, the
   * optimizer's state slabs (parameters in model order) and its step count.
   */
  public record Snapshot(
      String model,
      List<Safetensors.Tensor> weights,
      List<Safetensors.Values> optimizerState,
      int optimizerSteps,
      Map<String, Object> loopState,
      List<Safetensors.Tensor> averaged) {
    /**
     * {@code loopState}: what the training loop adds to state.json (the best epoch so far); {@code
     * averaged}: the weights' moving average by the same names, or empty.
     */
    public Snapshot {
      loopState = Map.copyOf(loopState);
      averaged = List.copyOf(averaged);
    }

    public Snapshot(
        String model,
        List<Safetensors.Tensor> weights,
        List<Safetensors.Values> optimizerState,
        int optimizerSteps) {
      this(model, weights, optimizerState, optimizerSteps, Map.of(), List.of());
    }

    public Snapshot withLoopState(Map<String, Object> state) {
      return new Snapshot(model, weights, optimizerState, optimizerSteps, state, averaged);
    }

    public Snapshot withAveraged(List<Safetensors.Tensor> tensors) {
      return new Snapshot(model, weights, optimizerState, optimizerSteps, loopState, tensors);
    }

    /**
     * The same with {@code state} for the optimizer's slabs after {@code steps} (a ZeRO rank's,
     * gathered whole).
     */
    public Snapshot withOptimizerState(List<float[]> state, int steps) {
      List<Safetensors.Values> values = state.stream().map(Safetensors.Values::of).toList();
      return new Snapshot(model, weights, values, steps, loopState, averaged);
    }
  }

  /**
   * Reads a resident model's and optimizer's state back from the device; {@code optimizer} null:
   * the weights only.
   */
  public static Snapshot snapshot(
      Model model, Optimizer optimizer, Backend backend, Stream stream) {
    Parameters p = model.parameters();
    List<Safetensors.Tensor> weights = new ArrayList<>();
    weights.addAll(tensors(p.entries(), download(backend, stream, p.values())));
    weights.addAll(tensors(p.bufferEntries(), download(backend, stream, p.buffers())));
    List<Safetensors.Values> state = new ArrayList<>();
    if (optimizer == null) { // the caller adds the state (a ZeRO rank's, gathered whole)
      return new Snapshot(model.spec(), weights, state, 0);
    }
    for (DeviceBuffer slab : optimizer.state()) {
      state.add(Safetensors.Values.of(download(backend, stream, slab)));
    }
    return new Snapshot(model.spec(), weights, state, optimizer.steps());
  }

  /**
   * The folder name of a checkpoint: {@code epoch-NNNN} at the end of an epoch, {@code
   * step-NNNNNNNNN} within one (a run resumes from either, its loader at the step's batch).
   */
  public static String name(int epochsDone, long globalStep, boolean endOfEpoch) {
    return endOfEpoch
        ? String.format("epoch-%04d", epochsDone)
        : String.format("step-%09d", globalStep);
  }

  /** Saves {@code snapshot} after {@code epochsDone} epochs; {@code info} adds to state.json. */
  public static Path save(
      Path runDir, int epochsDone, long globalStep, Snapshot snapshot, Map<String, Object> info)
      throws IOException {
    return save(runDir, name(epochsDone, globalStep, true), epochsDone, globalStep, snapshot, info);
  }

  /** Saves {@code snapshot} as checkpoint {@code name} ({@link #name}) and makes it the latest. */
  public static Path save(
      Path runDir,
      String name,
      int epochsDone,
      long globalStep,
      Snapshot snapshot,
      Map<String, Object> info)
      throws IOException {
    Path root = runDir.resolve("checkpoints");
    Files.createDirectories(root);
    Path tmp = root.resolve(name + ".tmp");
    deleteTree(tmp); // a staging folder a killed save left
    Files.createDirectories(tmp);
    try {
      writeInto(tmp, epochsDone, globalStep, snapshot, info);
    } catch (IOException | RuntimeException e) {
      try {
        deleteTree(tmp); // a full disk keeps no half checkpoint either
      } catch (IOException cleanup) {
        e.addSuppressed(cleanup);
      }
      throw e;
    }
    Path dir = root.resolve(name);
    deleteTree(dir);
    Files.move(tmp, dir, StandardCopyOption.ATOMIC_MOVE);
    PausePoints.reach("checkpoint.before-latest");
    point(runDir, LATEST, name);
    return dir;
  }

  private static void writeInto(
      Path tmp, int epochsDone, long globalStep, Snapshot snapshot, Map<String, Object> info)
      throws IOException {
    Map<String, String> meta = new TreeMap<>();
    meta.put("format", "pt");
    meta.put("ramtrain.model", snapshot.model());
    Safetensors.write(tmp.resolve("model.safetensors"), snapshot.weights(), meta);
    if (!snapshot.averaged().isEmpty()) {
      Safetensors.write(tmp.resolve(AVERAGED), snapshot.averaged(), meta);
    }
    PausePoints.reach("checkpoint.weights-written");
    List<Safetensors.Tensor> state = new ArrayList<>();
    List<Safetensors.Values> slabs = snapshot.optimizerState();
    for (int i = 0; i < slabs.size(); i++) {
      Safetensors.Values slab = slabs.get(i);
      state.add(new Safetensors.Tensor("state." + i, new long[] {slab.count()}, slab));
    }
    Safetensors.write(tmp.resolve("optimizer.safetensors"), state, Map.of());
    Map<String, Object> json = new TreeMap<>(info);
    json.putAll(snapshot.loopState());
    json.put("epochs_done", epochsDone);
    json.put("global_step", globalStep);
    json.put("optimizer_steps", snapshot.optimizerSteps());
    json.put("model", snapshot.model());
    Safetensors.writeFile(tmp.resolve("state.json"), JSON.writeValueAsBytes(json));
  }

  /**
   * Makes {@code checkpoints/pointer} ({@link #LATEST}, {@link #BEST}) name checkpoint {@code
   * name}: written beside, then renamed over the old pointer, so a reader sees the old name or the
   * new.
   */
  public static void point(Path runDir, String pointer, String name) throws IOException {
    Path root = runDir.resolve("checkpoints");
    Path tmp = root.resolve(pointer + ".tmp");
    try {
      Safetensors.writeFile(tmp, name.getBytes(StandardCharsets.UTF_8));
    } catch (IOException e) {
      Files.deleteIfExists(tmp);
      throw e;
    }
    Files.move(
        tmp,
        root.resolve(pointer),
        StandardCopyOption.ATOMIC_MOVE,
        StandardCopyOption.REPLACE_EXISTING);
  }

  /** The checkpoint {@code checkpoints/latest} of a run directory names. */
  public static Loaded loadLatest(Path runDir) throws IOException {
    return load(latest(runDir));
  }

  /** The checkpoint {@code checkpoints/best} names: the best epoch's by the run's metric. */
  public static Loaded loadBest(Path runDir) throws IOException {
    return load(pointed(runDir, BEST));
  }

  /**
   * What the latest checkpoint's state.json records (steps, epochs, model, what the run added),
   * read without its weights and optimizer state.
   */
  public static Map<String, Object> latestState(Path runDir) throws IOException {
    return readState(latest(runDir));
  }

  /**
   * Whether {@code name} is a checkpoint folder's ({@link #name}: epoch-NNNN or step-NNNNNNNNN).
   */
  public static boolean isName(String name) {
    return name.matches("epoch-\\d{4,9}|step-\\d{9,12}");
  }

  /** The folder {@code checkpoints/latest} names. */
  private static Path latest(Path runDir) throws IOException {
    return pointed(runDir, LATEST);
  }

  private static Path pointed(Path runDir, String pointer) throws IOException {
    Path root = runDir.resolve("checkpoints");
    String name;
    try {
      name = Files.readString(root.resolve(pointer)).strip();
    } catch (NoSuchFileException e) {
      throw new IOException(
          runDir + " has no " + pointer + " checkpoint (no checkpoints/" + pointer + ")", e);
    }
    if (!isName(name)) {
      throw new IOException(
          root.resolve(pointer)
              + " names '"
              + name
              + "', not a checkpoint folder (epoch-NNNN or step-NNNNNNNNN)");
    }
    return root.resolve(name);
  }

  public static Loaded load(Path dir) throws IOException {
    Map<String, Object> state = readState(dir);
    for (String part : new String[] {"model.safetensors", "optimizer.safetensors"}) {
      if (!Files.exists(dir.resolve(part))) { // said so, not the bare path of a NoSuchFile
        throw new IOException(
            dir.resolve(part) + " is missing: " + dir + " is not a whole checkpoint");
      }
    }
    // Left in the files, read as the model and the optimizer take them back: a large model's
    // weights and state pass the heap (ViT-H/14: 2.5 GB of weights, 5 GB of moments).
    Map<String, Safetensors.Tensor> weights =
        Safetensors.readInPlace(dir.resolve("model.safetensors"));
    List<Safetensors.Values> optimizer = new ArrayList<>();
    Safetensors.readInPlace(dir.resolve("optimizer.safetensors"))
        .values()
        .forEach(t -> optimizer.add(t.data()));
    Map<String, Safetensors.Tensor> averaged =
        Files.exists(dir.resolve(AVERAGED))
            ? Safetensors.readInPlace(dir.resolve(AVERAGED))
            : Map.of();
    return new Loaded(dir, state, weights, optimizer, averaged);
  }

  /** A checkpoint's state.json, checked for the counts and model every checkpoint records. */
  private static Map<String, Object> readState(Path dir) throws IOException {
    Path file = dir.resolve("state.json");
    Map<String, Object> state;
    try {
      state = JSON.readValue(Files.readAllBytes(file), new TypeReference<>() {});
    } catch (NoSuchFileException e) {
      throw new IOException(dir + " is not a checkpoint (no state.json)", e);
    } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
      throw new IOException(file + ": not valid JSON: " + e.getOriginalMessage(), e);
    }
    if (state == null) {
      throw new IOException(file + ": empty");
    }
    for (String key : new String[] {"epochs_done", "global_step", "optimizer_steps"}) {
      // Whole numbers a run reaches: not negative, not fractional, not near 2^63 (where step
      // arithmetic would overflow), and epochs within an int.
      long most = key.equals("epochs_done") ? Integer.MAX_VALUE : 1L << 53;
      if (!(state.get(key) instanceof Number n)
          || n instanceof Double
          || n instanceof Float
          || n.longValue() < 0
          || n.longValue() > most
          || (n instanceof java.math.BigInteger)) {
        throw new IOException(
            file + ": '" + key + "' is " + state.get(key) + ", not a count (0 to " + most + ")");
      }
    }
    if (!(state.get("model") instanceof String)) {
      throw new IOException(file + ": 'model' is missing or not a model spec");
    }
    return state;
  }

  /** Puts a checkpoint's weights (and optimizer state, if given) back onto the device. */
  public static void restore(
      Loaded c, Model model, Optimizer optimizer, Backend backend, Stream stream) {
    requireModel(c, model.spec());
    Parameters p = model.parameters();
    List<Parameters.Entry> all = new ArrayList<>(p.entries());
    all.addAll(p.bufferEntries());
    requireTensors(c, all);
    uploadTensors(backend, stream, p.values(), c, p.entries());
    uploadTensors(backend, stream, p.buffers(), c, p.bufferEntries());
    if (optimizer != null) {
      List<DeviceBuffer> slabs = optimizer.state();
      requireOptimizerSlabs(c, slabs.size());
      for (int i = 0; i < slabs.size(); i++) {
        if (c.optimizerState().get(i).count() != slabs.get(i).count()) {
          throw new IllegalArgumentException(
              slabs.get(i).label()
                  + " has "
                  + slabs.get(i).count()
                  + " values, the checkpoint "
                  + c.optimizerState().get(i).count());
        }
        upload(backend, stream, slabs.get(i), c.optimizerState().get(i), 0);
      }
      optimizer.resumeAt(c.optimizerSteps());
    }
  }

  /**
   * Throws unless {@code c}'s weights are exactly {@code expected}'s tensors: every name there,
   * none other, each of its shape (a transposed weight has the right count and the wrong shape),
   * and every value finite. One message lists every difference, naming the file.
   */
  public static void requireTensors(Loaded c, List<Parameters.Entry> expected) {
    List<String> problems = new ArrayList<>();
    Set<String> names = new HashSet<>();
    for (Parameters.Entry e : expected) {
      String name = e.spec().name();
      names.add(name);
      Safetensors.Tensor t = c.weights().get(name);
      long[] shape = Arrays.stream(e.spec().shape()).asLongStream().toArray();
      if (t == null) {
        problems.add("missing " + name + " " + Arrays.toString(shape));
      } else if (!Arrays.equals(shape, t.shape())) {
        problems.add(
            name + " is " + Arrays.toString(t.shape()) + ", the model's " + Arrays.toString(shape));
      } else {
        nonFinite(t.data()).ifPresent(at -> problems.add(name + " holds " + at));
      }
    }
    c.weights().keySet().stream()
        .filter(n -> !names.contains(n))
        .sorted()
        .forEach(n -> problems.add("unexpected " + n));
    if (!problems.isEmpty()) {
      throw new IllegalArgumentException(
          c.dir().resolve("model.safetensors")
              + " does not fit the model: "
              + String.join("; ", problems.subList(0, Math.min(10, problems.size())))
              + (problems.size() > 10 ? "; and " + (problems.size() - 10) + " more" : ""));
    }
  }

  /** What a piece of a tensor's values is read through: a few MiB of heap. */
  private static final int PIECE_FLOATS = 1 << 20;

  /** The first value of {@code v} that is not finite, as "NaN at [i]", read a piece at a time. */
  private static java.util.Optional<String> nonFinite(Safetensors.Values v) {
    float[] piece = new float[(int) Math.min(PIECE_FLOATS, v.count())];
    for (long from = 0; from < v.count(); from += piece.length) {
      int n = (int) Math.min(piece.length, v.count() - from);
      v.read(from, FloatBuffer.wrap(piece, 0, n));
      for (int i = 0; i < n; i++) {
        if (!Float.isFinite(piece[i])) {
          return java.util.Optional.of(piece[i] + " at [" + (from + i) + "]");
        }
      }
    }
    return java.util.Optional.empty();
  }

  /** Throws unless {@code c} was saved from model {@code spec}. */
  public static void requireModel(Loaded c, String spec) {
    if (!spec.equals(c.state().get("model"))) {
      throw new IllegalArgumentException(
          c.dir() + " was saved from model " + c.state().get("model") + ", not " + spec);
    }
  }

  /** Throws unless {@code c} holds {@code slabs} optimizer state slabs. */
  public static void requireOptimizerSlabs(Loaded c, int slabs) {
    if (slabs != c.optimizerState().size()) {
      throw new IllegalArgumentException(
          c.dir()
              + ": optimizer state has "
              + c.optimizerState().size()
              + " slabs, this optimizer "
              + slabs);
    }
  }

  /**
   * Cuts a slab into one named tensor per entry, each a view of its range: the heap holds the
   * model's weights once while a checkpoint is written.
   */
  public static List<Safetensors.Tensor> tensors(List<Parameters.Entry> entries, float[] slab) {
    List<Safetensors.Tensor> out = new ArrayList<>();
    for (Parameters.Entry e : entries) {
      long[] shape = Arrays.stream(e.spec().shape()).asLongStream().toArray();
      Safetensors.Values part =
          Safetensors.Values.of(slab, (int) e.offset(), (int) e.spec().count());
      out.add(new Safetensors.Tensor(e.spec().name(), shape, part));
    }
    return out;
  }

  /** Assembles a slab of {@code count} values from a checkpoint's named tensors. */
  public static float[] gather(Loaded c, List<Parameters.Entry> entries, long count) {
    float[] slab = new float[Math.toIntExact(count)];
    for (Parameters.Entry e : entries) {
      stored(c, e).read(0, FloatBuffer.wrap(slab, (int) e.offset(), (int) e.spec().count()));
    }
    return slab;
  }

  /**
   * Writes a checkpoint's named tensors into a host slab at their entries' offsets, straight from
   * the file a view at a time: ViT-H/14's 2.5 GB of masters never pass the heap.
   */
  public static void fill(Loaded c, List<Parameters.Entry> entries, HostBuffer slab) {
    for (Parameters.Entry e : entries) {
      Safetensors.Values v = stored(c, e);
      for (long from = 0; from < v.count(); from += HostBuffer.FLOATS_PER_COPY) {
        long n = Math.min(HostBuffer.FLOATS_PER_COPY, v.count() - from);
        v.read(from, slab.floats(e.offset() + from, n));
      }
    }
  }

  /** The values {@code c} holds for entry {@code e}, checked for their count. */
  private static Safetensors.Values stored(Loaded c, Parameters.Entry e) {
    Safetensors.Tensor t = c.weights().get(e.spec().name());
    if (t == null || t.data().count() != e.spec().count()) {
      throw new IllegalArgumentException(
          c.dir() + ": tensor " + e.spec().name() + " is missing or has the wrong size");
    }
    return t.data();
  }

  /** What {@link #uploadTensors} stages at a time: a few MiB, not a second copy of the model. */
  static final long UPLOAD_CHUNK_BYTES = 8L << 20;

  /**
   * Writes {@code c}'s tensor for each entry into {@code slab} at the entry's offset through one
   * staging buffer of at most {@link #UPLOAD_CHUNK_BYTES}, tensor by tensor (synchronizes the
   * stream): neither the heap nor the host holds the slab a second time while it is filled.
   */
  public static void uploadTensors(
      Backend backend, Stream stream, DeviceBuffer slab, Loaded c, List<Parameters.Entry> entries) {
    uploadTensors(backend, stream, slab, c, entries, UPLOAD_CHUNK_BYTES);
  }

  /** As above, staging at most {@code chunkBytes} at a time. */
  static void uploadTensors(
      Backend backend,
      Stream stream,
      DeviceBuffer slab,
      Loaded c,
      List<Parameters.Entry> entries,
      long chunkBytes) {
    long chunk = Math.min(chunkBytes, Math.max(4, slab.bytes()));
    try (HostBuffer h = backend.allocateHost("checkpoint", chunk)) {
      for (Parameters.Entry e : entries) {
        upload(backend, stream, h, stored(c, e), 0, slab.view(e.offset(), e.spec().count()));
      }
    }
  }

  /**
   * Writes values [{@code from}, {@code from + d.count()}) of {@code values} into {@code d} through
   * one staging buffer of at most {@link #UPLOAD_CHUNK_BYTES} (synchronizes the stream): an
   * optimizer state slab, or a rank's share of it, read from the checkpoint's file a piece at a
   * time.
   */
  public static void upload(
      Backend backend, Stream stream, DeviceBuffer d, Safetensors.Values values, long from) {
    if (from < 0 || from > values.count() - d.count()) {
      throw new IllegalArgumentException(
          d.label()
              + " takes values ["
              + from
              + ", "
              + (from + d.count())
              + "), the checkpoint holds "
              + values.count());
    }
    try (HostBuffer h =
        backend.allocateHost("checkpoint", Math.min(UPLOAD_CHUNK_BYTES, Math.max(4, d.bytes())))) {
      upload(backend, stream, h, values, from, d);
    }
  }

  private static void upload(
      Backend backend,
      Stream stream,
      HostBuffer staging,
      Safetensors.Values values,
      long from,
      DeviceBuffer d) {
    long capacity = staging.bytes() / 4;
    for (long done = 0; done < d.count(); done += capacity) {
      long n = Math.min(capacity, d.count() - done);
      values.read(from + done, staging.floats(0, n));
      backend.copy(staging, 0, d.view(done, n), 4 * n, stream);
      stream.synchronize(); // the staging buffer is reused for the next piece
    }
  }

  /**
   * A device buffer's values, read back through one staging buffer of at most {@link
   * #UPLOAD_CHUNK_BYTES} (synchronizes the stream): the host holds them once, in the array.
   */
  public static float[] download(Backend backend, Stream stream, DeviceBuffer d) {
    float[] out = new float[Math.toIntExact(d.count())];
    try (HostBuffer h =
        backend.allocateHost("checkpoint", Math.min(UPLOAD_CHUNK_BYTES, Math.max(4, d.bytes())))) {
      long capacity = h.bytes() / 4;
      for (long done = 0; done < out.length; done += capacity) {
        int n = (int) Math.min(capacity, out.length - done);
        backend.copy(d.view(done, n), h, 0, 4L * n, stream);
        stream.synchronize();
        h.getFloats(0, out, (int) done, n);
      }
    }
    return out;
  }

  /** Writes {@code values} into a device buffer of the same length (synchronizes the stream). */
  public static void upload(Backend backend, Stream stream, DeviceBuffer d, float[] values) {
    if (values.length != d.count()) {
      throw new IllegalArgumentException(
          d.label() + " has " + d.count() + " values, the checkpoint " + values.length);
    }
    try (HostBuffer h = backend.allocateHost("checkpoint", d.bytes())) {
      h.putFloats(0, values, 0, values.length);
      backend.copy(h, 0, d, d.bytes(), stream);
      stream.synchronize();
    }
  }

  private static void deleteTree(Path dir) throws IOException {
    if (!Files.exists(dir)) {
      return;
    }
    try (java.util.stream.Stream<Path> walk = Files.walk(dir)) {
      for (Path p : walk.sorted(Comparator.reverseOrder()).toList()) {
        Files.delete(p);
      }
    }
  }
}
