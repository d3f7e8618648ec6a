package dev.ramtrain.trainer.checkpoint;

import dev.ramtrain.trainer.nn.Layer;
import dev.ramtrain.trainer.nn.ParamSpec;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
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
  private final Map<String, Safetensors.Tensor> tensors; // by timm's names

  private PretrainedWeights(Path file, String naming, Map<String, Safetensors.Tensor> tensors) {
    this.file = file;
    this.naming = naming;
    this.tensors = tensors;
  }

  /**
   * Reads {@code file}: safetensors, or PyTorch's own {@code torch.save} zip archive ({@code .pth},
   * {@code .pt}: recognised by its first bytes) through a pickle reader that accepts only what a
   * tensor state dict needs. An unreadable or malformed file is an IOException naming it.
   */
  public static PretrainedWeights read(Path file) throws IOException {
    byte[] head = new byte[4];
    try (java.io.InputStream in = java.nio.file.Files.newInputStream(file)) {
      in.readNBytes(head, 0, 4);
    } catch (java.nio.file.NoSuchFileException e) {
      throw new IOException(file + ": no such file", e);
    }
    Map<String, Safetensors.Tensor> raw =
        TorchArchive.isZip(head)
            ? TorchArchive.read(file)
            : Safetensors.read(file, new HashMap<>());
    if (TorchvisionNames.detect(raw.keySet())) {
      Map<String, Safetensors.Tensor> renamed = new LinkedHashMap<>();
      raw.forEach(
          (k, t) -> {
            String name = TorchvisionNames.toTimm(k);
            long[] shape = TorchvisionNames.timmShape(name, t.shape());
            renamed.put(name, new Safetensors.Tensor(name, shape, t.values()));
          });
      return new PretrainedWeights(file, "torchvision", renamed);
    }
    return new PretrainedWeights(file, "timm", raw);
  }

  /** "timm" or "torchvision": whose names the file carried. */
  public String naming() {
    return naming;
  }

  /** The classifier's output count, or -1 when the file has no head ramtrain knows. */
  public int classes() {
    for (String head : HEADS) {
      Safetensors.Tensor bias = tensors.get(head + ".bias");
      if (bias != null && bias.shape().length == 1) {
        return (int) bias.shape()[0];
      }
    }
    return -1;
  }

  /**
   * As {@link #matchTo(String, List, List)} for the parameters and buffers {@code layers} declare.
   */
  public Map<String, float[]> matchTo(String model, List<Layer> layers) {
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
   * above; what is left out (a replaced head) starts as the model initializes it.
   *
   * @throws IllegalArgumentException listing every mismatch, naming the file and {@code model}
   */
  public Map<String, float[]> matchTo(
      String model, List<ParamSpec> params, List<ParamSpec> buffers) {
    Map<String, ParamSpec> wanted = new LinkedHashMap<>();
    params.forEach(p -> wanted.put(p.name(), p));
    buffers.forEach(p -> wanted.put(p.name(), p));
    Map<String, float[]> values = new LinkedHashMap<>();
    List<String> missing = new ArrayList<>();
    List<String> mismatched = new ArrayList<>();
    List<String> replacedHead = new ArrayList<>();
    for (ParamSpec p : wanted.values()) {
      Safetensors.Tensor t = tensors.get(p.name());
      if (t == null) {
        missing.add(p.name());
        continue;
      }
      long[] want = Arrays.stream(p.shape()).asLongStream().toArray();
      if (Arrays.equals(want, t.shape())) {
        values.put(p.name(), t.values());
      } else if (isHead(p.name()) && anotherClassCount(p.name(), t.shape(), want)) {
        replacedHead.add(p.name()); // another class count: timm's rule, a fresh classifier
      } else if (p.name().equals("pos_embed") && PositionEmbedding.resizable(t.shape(), want)) {
        values.put(p.name(), PositionEmbedding.resample(t.values(), t.shape(), want));
        LOG.info(
            "{}: position embedding resampled from {} to {} tokens (bicubic over the grid)",
            file,
            t.shape()[1],
            want[1]);
      } else {
        mismatched.add(
            p.name() + " " + Arrays.toString(t.shape()) + " in the file, " + Arrays.toString(want));
      }
    }
    List<String> unexpected = new ArrayList<>();
    for (String name : tensors.keySet()) {
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
    Safetensors.Tensor weight = tensors.get(head + ".weight");
    Safetensors.Tensor bias = tensors.get(head + ".bias");
    return weight == null
        || bias == null
        || bias.shape().length != 1
        || (weight.shape().length > 0 && weight.shape()[0] == bias.shape()[0]);
  }

  private static boolean isHead(String name) {
    int dot = name.lastIndexOf('.');
    return dot > 0 && HEADS.contains(name.substring(0, dot));
  }

  private static String list(String what, List<String> names) {
    if (names.isEmpty()) {
      return "";
    }
    List<String> shown = names.size() > 6 ? names.subList(0, 6) : names;
    return what
        + " "
        + names.size()
        + " ("
        + String.join(", ", shown)
        + (names.size() > shown.size() ? ", …" : "")
        + ");";
  }
}
