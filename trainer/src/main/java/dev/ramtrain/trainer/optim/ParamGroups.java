package dev.ramtrain.trainer.optim;

import dev.ramtrain.trainer.nn.ParamSpec;
import dev.ramtrain.trainer.nn.Parameters;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Which parameters an optimizer step updates, with what learning-rate scale and whether with weight
 * decay: timm's parameter groups. {@link Rules} says how they are drawn; {@link #of} lays them over
 * a slab's entries, merging neighbours alike into one range, so an optimizer runs one step per
 * range (one for the whole slab when every parameter is alike, as before groups existed).
 */
public final class ParamGroups {
  /**
   * {@code layerDecay}: timm's {@code param_groups_layer_decay} (1: off): the learning rate of a
   * parameter in layer id i of 0..L is scaled by {@code layerDecay^(L - i)}, the ids drawn by
   * timm's group matchers ({@link #layerIds}): a ViT of n blocks has its embeddings at 0, block i
   * at i + 1 with the final norm beside the last block, the head at n + 1; a ConvNeXt and a ResNet
   * likewise by stem, block and classifier. {@code timmDecay}: timm's default groups, no weight
   * decay on biases, norms (every parameter of at most one dimension), {@code cls_token} and {@code
   * pos_embed}. {@code freeze}: a regular expression; parameters whose names it matches entirely
   * are not updated at all ("" : none).
   */
  public record Rules(float layerDecay, boolean timmDecay, String freeze) implements Serializable {
    public static final Rules NONE = new Rules(1f, false, "");

    public Rules {
      if (!(layerDecay > 0 && layerDecay <= 1)) {
        throw new IllegalArgumentException("layer decay must be in (0, 1], got " + layerDecay);
      }
      Pattern.compile(freeze); // a bad pattern fails here, where the settings are read
    }
  }

  /**
   * A slab's parameters, and the part of it [from, to) an optimizer updates: the whole slab, or a
   * rank's share of it (ZeRO-1), whose elements the optimizer numbers from 0.
   */
  public record Layout(List<Parameters.Entry> entries, long from, long to) {
    public static Layout whole(List<Parameters.Entry> entries) {
      long end = entries.stream().mapToLong(e -> e.offset() + e.spec().count()).max().orElse(0);
      return new Layout(entries, 0, end);
    }

    public Layout share(long shareFrom, long shareTo) {
      return new Layout(entries, shareFrom, shareTo);
    }

    /** The groups {@code rules} draws over this part, numbered from its first element. */
    public ParamGroups groups(Rules rules) {
      List<Range> parts = new ArrayList<>();
      for (Range r : of(rules, entries).within(from, to)) {
        parts.add(new Range(r.offset() - from, r.count(), r.lrScale(), r.decay()));
      }
      return new ParamGroups(parts);
    }
  }

  /** Elements [offset, offset + count) of the slab, updated alike. */
  public record Range(long offset, long count, float lrScale, boolean decay) {}

  private final List<Range> ranges;

  private ParamGroups(List<Range> ranges) {
    this.ranges = List.copyOf(ranges);
  }

  /** Every parameter alike over {@code count} elements: one range. */
  public static ParamGroups uniform(long count) {
    return new ParamGroups(count == 0 ? List.of() : List.of(new Range(0, count, 1f, true)));
  }

  /** The groups {@code rules} draws over {@code entries} (a slab's parameters and offsets). */
  public static ParamGroups of(Rules rules, List<Parameters.Entry> entries) {
    List<String> names = entries.stream().map(e -> e.spec().name()).toList();
    Map<String, Integer> layerIds = rules.layerDecay() < 1 ? layerIds(names) : Map.of();
    int maxId = layerIds.values().stream().mapToInt(Integer::intValue).max().orElse(0);
    Pattern frozen = rules.freeze().isEmpty() ? null : Pattern.compile(rules.freeze());
    List<Parameters.Entry> ordered = new ArrayList<>(entries);
    ordered.sort(Comparator.comparingLong(Parameters.Entry::offset));
    List<Range> ranges = new ArrayList<>();
    for (Parameters.Entry e : ordered) {
      ParamSpec p = e.spec();
      if (frozen != null && BoundedMatch.matches(frozen, p.name(), "ramtrain.train.freeze")) {
        continue;
      }
      float scale =
          layerIds.isEmpty()
              ? 1f
              : (float) Math.pow(rules.layerDecay(), maxId - layerIds.get(p.name()));
      boolean decay = !(rules.timmDecay() && exempt(p));
      Range next = new Range(e.offset(), p.count(), scale, decay);
      Range last = ranges.isEmpty() ? null : ranges.get(ranges.size() - 1);
      if (last != null
          && last.offset() + last.count() == next.offset()
          && last.lrScale() == scale
          && last.decay() == decay) {
        ranges.set(
            ranges.size() - 1, new Range(last.offset(), last.count() + p.count(), scale, decay));
      } else {
        ranges.add(next);
      }
    }
    return new ParamGroups(ranges);
  }

  /**
   * timm's layer ids ({@code group_matcher} through {@code group_with_matcher}, as {@code
   * param_groups_layer_decay} draws them): each parameter gets its architecture's sort key, the
   * distinct keys are numbered in order, a key ending in {@link #WITH_PREVIOUS} joins the group
   * before it, and parameters no pattern matches (the head) come last. A ViT: the embeddings, each
   * block, the final norm with the last block, the head. A ConvNeXt: the stem, each stage's blocks
   * (a stage's downsampling with its first block), the head. A ResNet: the stem, each block of each
   * stage, the classifier. A model of none of these is refused: training every layer at the full
   * rate would silently ignore the setting.
   */
  static Map<String, Integer> layerIds(List<String> names) {
    Pattern[] family = null;
    for (Pattern[] candidate : List.of(VIT, CONVNEXT, RESNET)) {
      if (names.stream().anyMatch(n -> candidate[1].matcher(n).lookingAt())) {
        family = candidate;
        break;
      }
    }
    if (family == null) {
      throw new IllegalArgumentException(
          "layer decay groups a ViT's blocks.N, a ConvNeXt's stages.N.blocks.M or a ResNet's"
              + " layerN.M; this model has none (set it to 1)");
    }
    Map<String, List<Double>> keys = new LinkedHashMap<>();
    for (String name : names) {
      keys.put(name, key(family, name));
    }
    List<List<Double>> sorted = keys.values().stream().distinct().sorted(KEY_ORDER).toList();
    Map<List<Double>, Integer> ids = new HashMap<>();
    int id = -1;
    for (List<Double> k : sorted) {
      if (id < 0 || k.get(k.size() - 1) != WITH_PREVIOUS) {
        id++;
      }
      ids.put(k, id);
    }
    Map<String, Integer> out = new LinkedHashMap<>();
    keys.forEach((name, k) -> out.put(name, ids.get(k)));
    return out;
  }

  /** timm's MATCH_PREV_GROUP: a group that joins the one before it (a ViT's final norm). */
  private static final double WITH_PREVIOUS = 99999;

  // Each family's patterns in timm's order, as re.match applies them (anchored at the start):
  // [0] the stem, [1] the blocks, [2] the group joined to the previous one (or one that never
  // matches), [3] a ConvNeXt's downsampling (or one that never matches).
  private static final Pattern[] VIT = {
    Pattern.compile("cls_token|pos_embed|patch_embed"),
    Pattern.compile("blocks\\.(\\d+)"),
    Pattern.compile("norm"),
    Pattern.compile("(?!)")
  };
  private static final Pattern[] CONVNEXT = {
    Pattern.compile("stem"),
    Pattern.compile("stages\\.(\\d+)\\.blocks\\.(\\d+)"),
    Pattern.compile("norm_pre"),
    Pattern.compile("stages\\.(\\d+)\\.downsample")
  };
  private static final Pattern[] RESNET = {
    Pattern.compile("conv1|bn1|maxpool"),
    Pattern.compile("layer(\\d+)\\.(\\d+)"),
    Pattern.compile("(?!)"),
    Pattern.compile("(?!)")
  };

  /** Numeric tuples in order, a shorter one first where one is the other's prefix (Python's). */
  private static final Comparator<List<Double>> KEY_ORDER =
      (a, b) -> {
        for (int i = 0; i < Math.min(a.size(), b.size()); i++) {
          int c = Double.compare(a.get(i), b.get(i));
          if (c != 0) {
            return c;
          }
        }
        return Integer.compare(a.size(), b.size());
      };

  /** A parameter's sort key under {@code family}'s patterns: timm's (ordinal, groups…, suffix). */
  private static List<Double> key(Pattern[] family, String name) {
    if (family[0].matcher(name).lookingAt()) {
      return List.of(0.0);
    }
    // timm's list order: a ConvNeXt's downsampling before its blocks, the norm after them
    Matcher down = family[3].matcher(name);
    if (down.lookingAt()) {
      return List.of(1.0, Double.parseDouble(down.group(1)), 0.0);
    }
    Matcher blocks = family[1].matcher(name);
    if (blocks.lookingAt()) {
      List<Double> k = new ArrayList<>(List.of(1.0));
      for (int g = 1; g <= blocks.groupCount(); g++) {
        k.add(Double.parseDouble(blocks.group(g)));
      }
      return k;
    }
    if (family[2].matcher(name).lookingAt()) {
      return List.of(1.0, WITH_PREVIOUS);
    }
    return List.of(Double.POSITIVE_INFINITY);
  }

  /** timm's no-decay set: one-dimensional parameters (biases, norms) and the ViT's embeddings. */
  private static boolean exempt(ParamSpec p) {
    return p.shape().length <= 1
        || p.name().endsWith(".bias")
        || p.name().equals("cls_token")
        || p.name().equals("pos_embed");
  }

  public List<Range> ranges() {
    return ranges;
  }

  /**
   * The elements of [0, count) no range covers, as (offset, count) pairs: the frozen parameters,
   * whose gradients gradient clipping must leave out as timm's does (theirs are never computed).
   */
  public List<long[]> frozen(long count) {
    List<long[]> gaps = new ArrayList<>();
    long at = 0;
    for (Range r : ranges) {
      if (r.offset() > at) {
        gaps.add(new long[] {at, r.offset() - at});
      }
      at = r.offset() + r.count();
    }
    if (at < count) {
      gaps.add(new long[] {at, count - at});
    }
    return gaps;
  }

  /** The parts of the ranges within elements [from, to), in order. */
  public List<Range> within(long from, long to) {
    List<Range> parts = new ArrayList<>();
    for (Range r : ranges) {
      long a = Math.max(from, r.offset());
      long b = Math.min(to, r.offset() + r.count());
      if (a < b) {
        parts.add(new Range(a, b - a, r.lrScale(), r.decay()));
      }
    }
    return parts;
  }
}
