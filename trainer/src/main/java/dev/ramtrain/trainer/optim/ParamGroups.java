package dev.ramtrain.trainer.optim;

import dev.ramtrain.trainer.nn.ParamSpec;
import dev.ramtrain.trainer.nn.Parameters;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
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
   * {@code layerDecay}: timm's {@code param_groups_layer_decay} (1: off): a transformer block i of
   * n scales the learning rate by {@code layerDecay^(n - i)}, the embeddings (patch embedding,
   * class token, position embedding) by {@code layerDecay^(n + 1)}, the final norm and head by 1.
   * {@code timmDecay}: timm's default groups, no weight decay on biases, norms (every parameter of
   * at most one dimension), {@code cls_token} and {@code pos_embed}. {@code freeze}: a regular
   * expression; parameters whose names it matches entirely are not updated at all ("" : none).
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

  private static final Pattern BLOCK = Pattern.compile("^blocks\\.(\\d+)\\..*");
  private static final Pattern EMBEDDING =
      Pattern.compile("^(cls_token|pos_embed|patch_embed\\..*)$");

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
    int blocks = 0;
    for (Parameters.Entry e : entries) {
      Matcher m = BLOCK.matcher(e.spec().name());
      if (m.matches()) {
        blocks = Math.max(blocks, Integer.parseInt(m.group(1)) + 1);
      }
    }
    if (rules.layerDecay() < 1 && blocks == 0) {
      // timm's ResNet and ConvNeXt groupings are not drawn here: refuse, rather than train
      // every layer at the full rate as if layer decay were on
      throw new IllegalArgumentException(
          "layer decay groups a ViT's blocks.N; this model has none (set it to 1)");
    }
    Pattern frozen = rules.freeze().isEmpty() ? null : Pattern.compile(rules.freeze());
    List<Parameters.Entry> ordered = new ArrayList<>(entries);
    ordered.sort(Comparator.comparingLong(Parameters.Entry::offset));
    List<Range> ranges = new ArrayList<>();
    for (Parameters.Entry e : ordered) {
      ParamSpec p = e.spec();
      if (frozen != null && frozen.matcher(p.name()).matches()) {
        continue;
      }
      float scale = (float) Math.pow(rules.layerDecay(), blocks + 1 - layerId(p.name(), blocks));
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
   * timm's layer id for a ViT ({@code group_matcher}): the embeddings 0, block i i + 1, the rest
   * (final norm, head) {@code blocks + 1}.
   */
  static int layerId(String name, int blocks) {
    if (EMBEDDING.matcher(name).matches()) {
      return 0;
    }
    Matcher m = BLOCK.matcher(name);
    return m.matches() ? Integer.parseInt(m.group(1)) + 1 : blocks + 1;
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
