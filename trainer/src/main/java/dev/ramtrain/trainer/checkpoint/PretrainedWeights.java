package dev.ramtrain.trainer.checkpoint;

import dev.ramtrain.console.Printable;
import dev.ramtrain.trainer.nn.Layer;
import dev.ramtrain.trainer.nn.ParamSpec;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Pretrained weights as timm and torchvision save them ({@code model.safetensors}, or PyTorch's
 * {@code .pth} state dicts), matched to a model strictly, as {@code load_state_dict(strict=True)}:
 * every missing key, unexpected key and shape mismatch is listed in one error. Two exceptions are
 * timm's own: when the class count differs, the classifier ({@code head}, {@code fc}, {@code
 * head.fc}) is left out and starts fresh (logged), and a ViT's position embedding for another image
 * size is resampled over its grid ({@link PositionEmbedding}). torchvision's names are recognised
 * from the keys and renamed. {@code num_batches_tracked} is optional.
 */
public final class PretrainedWeights {
  private static final Logger LOG = LoggerFactory.getLogger(PretrainedWeights.class);
  private static final Set<String> HEADS = Set.of("head", "fc", "head.fc");

  private final Path file;
  private final String naming;
  private final StoredTensors stored;
  private final Map<String, String> storedNames; // timm's name -> the file's
  private final Map<String, long[]> shapes; // by timm's names, in the file's order

  private PretrainedWeights(
      Path file,
      String naming,
      StoredTensors stored,
      Map<String, String> storedNames,
      Map<String, long[]> shapes) {
    this.file = file;
    this.naming = naming;
    this.stored = stored;
    this.storedNames = storedNames;
    this.shapes = shapes;
  }

  /**
   * Reads {@code file}'s index: safetensors, or PyTorch's own {@code torch.save} zip archive
   * ({@code .pth}, {@code .pt}: recognised by its first bytes) through a pickle reader that accepts
   * only what a tensor state dict needs. An unreadable or malformed file is an IOException naming
   * it. The tensors' values are read by {@link #matchTo}, and only those the model takes.
   */
  public static PretrainedWeights read(Path file) throws IOException {
    byte[] head;
    try (java.io.InputStream in = java.nio.file.Files.newInputStream(file)) {
      head = in.readNBytes(16);
    } catch (java.nio.file.NoSuchFileException e) {
      throw new IOException(file + ": no such file", e);
    }
    if (TorchArchive.isLegacy(head)) {
      throw new IOException(
          file
              + ": a torch.save file of the legacy format (PyTorch before 1.6, or"
              + " _use_new_zipfile_serialization=False), which is not read; save it again in"
              + " PyTorch as torch.save(torch.load(f, weights_only=True), 'new.pth'), or as"
              + " safetensors");
    }
    StoredTensors stored =
        TorchArchive.isZip(head)
            ? TorchArchive.index(file)
            : Safetensors.index(file, new HashMap<>());
    Map<String, long[]> raw = stored.shapes();
    boolean torchvision = TorchvisionNames.detect(raw.keySet());
    Map<String, String> storedNames = new LinkedHashMap<>();
    Map<String, long[]> shapes = new LinkedHashMap<>();
    raw.forEach(
        (k, shape) -> {
          String name = torchvision ? TorchvisionNames.toTimm(k) : k;
          storedNames.put(name, k);
          shapes.put(name, torchvision ? TorchvisionNames.timmShape(name, shape) : shape);
        });
    return new PretrainedWeights(
        file, torchvision ? "torchvision" : "timm", stored, storedNames, shapes);
  }

  /** "timm" or "torchvision": whose names the file carried. */
  public String naming() {
    return naming;
  }

  /** The classifier's output count, or -1 when the file has no head ramtrain knows. */
  public int classes() {
    for (String head : HEADS) {
      long[] bias = shapes.get(head + ".bias");
      if (bias != null && bias.length == 1) {
        return (int) bias[0];
      }
    }
    return -1;
  }

  /**
   * As {@link #matchTo(String, List, List)} for the parameters and buffers {@code layers} declare.
   */
  public Map<String, float[]> matchTo(String model, List<Layer> layers) throws IOException {
    List<ParamSpec> params = new ArrayList<>();
    List<ParamSpec> buffers = new ArrayList<>();
    for (Layer layer : layers) {
      params.addAll(layer.parameters());
      buffers.addAll(layer.buffers());
    }
    return matchTo(model, params, buffers);
  }

  /**
   * The values for {@code params} and {@code buffers} (a model's, by name), checked as described
   * above; what is left out (a replaced head) starts as the model initializes it. Names and shapes
   * are matched before any value is read, and only the values the model takes are read.
   *
   * @throws IllegalArgumentException listing every mismatch, naming the file and {@code model}
   * @throws IOException when a tensor the model takes cannot be read
   */
  public Map<String, float[]> matchTo(String model, List<ParamSpec> params, List<ParamSpec> buffers)
      throws IOException {
    Map<String, ParamSpec> wanted = new LinkedHashMap<>();
    params.forEach(p -> wanted.put(p.name(), p));
    buffers.forEach(p -> wanted.put(p.name(), p));
    Map<String, long[]> taken = new LinkedHashMap<>(); // the model's names -> its shapes
    List<String> missing = new ArrayList<>();
    List<String> mismatched = new ArrayList<>();
    List<String> replacedHead = new ArrayList<>();
    for (ParamSpec p : wanted.values()) {
      long[] has = shapes.get(p.name());
      if (has == null) {
        missing.add(p.name());
        continue;
      }
      long[] want = Arrays.stream(p.shape()).asLongStream().toArray();
      if (Arrays.equals(want, has)
          || (p.name().equals("pos_embed") && PositionEmbedding.resizable(has, want))) {
        taken.put(p.name(), want);
      } else if (isHead(p.name()) && anotherClassCount(p.name(), has, want)) {
        replacedHead.add(p.name()); // another class count: timm's rule, a fresh classifier
      } else {
        mismatched.add(
            p.name() + " " + Arrays.toString(has) + " in the file, " + Arrays.toString(want));
      }
    }
    List<String> unexpected = new ArrayList<>();
    for (String name : shapes.keySet()) {
      if (!wanted.containsKey(name) && !name.endsWith("num_batches_tracked")) {
        unexpected.add(name);
      }
    }
    if (!missing.isEmpty() || !unexpected.isEmpty() || !mismatched.isEmpty()) {
      throw new IllegalArgumentException(
          file
              + " ("
              + naming
              + " names) does not fit "
              + model
              + ":"
              + list(" missing", missing)
              + list(" unexpected", unexpected)
              + list(" shape mismatches", mismatched));
    }
    if (!replacedHead.isEmpty()) {
      LOG.info(
          "{}: the classifier {} has another class count ({} in the file): left out, it starts"
              + " fresh as timm does",
          file,
          replacedHead,
          classes());
    }
    return values(taken);
  }

  /** The values of the tensors {@code taken} (timm's names to the model's shapes), as read. */
  private Map<String, float[]> values(Map<String, long[]> taken) throws IOException {
    Set<String> names = new HashSet<>();
    taken.keySet().forEach(name -> names.add(storedNames.get(name)));
    Map<String, float[]> read = stored.read(names);
    Map<String, float[]> values = new LinkedHashMap<>();
    for (Map.Entry<String, long[]> t : taken.entrySet()) {
      String name = t.getKey();
      long[] has = shapes.get(name);
      float[] v = read.get(storedNames.get(name));
      if (Arrays.equals(has, t.getValue())) {
        values.put(name, v);
      } else { // the position embedding of another grid
        values.put(name, PositionEmbedding.resample(v, has, t.getValue()));
        LOG.info(
            "{}: position embedding resampled from {} to {} tokens (bicubic over the grid)",
            file,
            has[1],
            t.getValue()[1]);
      }
    }
    return values;
  }

  /**
   * Whether a head tensor differs from the model's only in its class count: the same rank and every
   * dimension but the first, the file's weight and bias agreeing on the count. A weight stored [in,
   * classes] (transposed) is misshapen, not another class count (it was taken for one, and the head
   * silently started fresh).
   */
  private boolean anotherClassCount(String name, long[] has, long[] want) {
    if (has.length != want.length || has.length == 0) {
      return false;
    }
    for (int i = 1; i < has.length; i++) {
      if (has[i] != want[i]) {
        return false;
      }
    }
    String head = name.substring(0, name.lastIndexOf('.'));
    long[] weight = shapes.get(head + ".weight");
    long[] bias = shapes.get(head + ".bias");
    return weight == null
        || bias == null
        || bias.length != 1
        || (weight.length > 0 && weight[0] == bias[0]);
  }

  private static boolean isHead(String name) {
    int dot = name.lastIndexOf('.');
    return dot > 0 && HEADS.contains(name.substring(0, dot));
  }

  private static String list(String what, List<String> names) {
    if (names.isEmpty()) {
      return "";
    }
    List<String> shown =
        (names.size() > 6 ? names.subList(0, 6) : names).stream().map(Printable::name).toList();
    return what
        + " "
        + names.size()
        + " ("
        + String.join(", ", shown)
        + (names.size() > shown.size() ? ", …" : "")
        + ");";
  }
}
