package dev.ramtrain.trainer.optim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.trainer.nn.Layer;
import dev.ramtrain.trainer.nn.ModelSpec;
import dev.ramtrain.trainer.nn.ParamSpec;
import dev.ramtrain.trainer.nn.Parameters;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** timm's parameter groups over a ViT-B/16's slab, against values worked out by hand. */
class ParamGroupsTest {
  /** A slab's entries in model order, as Parameters lays them out. */
  static List<Parameters.Entry> slab(List<Layer> layers) {
    List<Parameters.Entry> entries = new ArrayList<>();
    long offset = 0;
    for (Layer layer : layers) {
      for (ParamSpec p : layer.parameters()) {
        entries.add(new Parameters.Entry(p, offset));
        offset += p.count();
      }
    }
    return entries;
  }

  /** Each parameter's (scale, decay), or absent when frozen. */
  static Map<String, ParamGroups.Range> byName(ParamGroups groups, List<Parameters.Entry> slab) {
    Map<String, ParamGroups.Range> out = new LinkedHashMap<>();
    for (Parameters.Entry e : slab) {
      List<ParamGroups.Range> parts = groups.within(e.offset(), e.offset() + e.spec().count());
      if (!parts.isEmpty()) {
        assertEquals(1, parts.size(), e.spec().name() + " lies in one range");
        out.put(e.spec().name(), parts.get(0));
      }
    }
    return out;
  }

  private static final List<Parameters.Entry> VIT_B =
      slab(ModelSpec.parse("vit_base_patch16_224", new ImageShape(224, 224, 3)));

  @Test
  void layerDecayIsTimmsForTwelveBlocks() {
    Map<String, ParamGroups.Range> g =
        byName(ParamGroups.of(new ParamGroups.Rules(0.75f, true, ""), VIT_B), VIT_B);
    // timm: 14 layer ids (embeddings 0, blocks 1..12 with the final norm beside block 12, the
    // head 13: its group_matcher's (r'^norm', (99999,))), scale 0.75^(13 - id)
    assertEquals((float) Math.pow(0.75, 13), g.get("cls_token").lrScale()); // 0.023757...
    assertEquals((float) Math.pow(0.75, 13), g.get("patch_embed.proj.weight").lrScale());
    assertEquals((float) Math.pow(0.75, 12), g.get("blocks.0.attn.qkv.weight").lrScale());
    assertEquals(0.75f * 0.75f, g.get("blocks.10.mlp.fc1.bias").lrScale());
    assertEquals(0.75f, g.get("blocks.11.norm2.weight").lrScale());
    assertEquals(0.75f, g.get("norm.weight").lrScale());
    assertEquals(1f, g.get("head.weight").lrScale());
    assertEquals(0.0316764f, g.get("blocks.0.norm1.bias").lrScale(), 1e-7f);
  }

  @Test
  void timmsDecayGroupsSpareBiasesNormsAndEmbeddings() {
    Map<String, ParamGroups.Range> g =
        byName(ParamGroups.of(new ParamGroups.Rules(1f, true, ""), VIT_B), VIT_B);
    for (String spared :
        List.of(
            "cls_token",
            "pos_embed",
            "patch_embed.proj.bias",
            "blocks.3.norm1.weight",
            "blocks.3.attn.qkv.bias",
            "norm.bias",
            "head.bias")) {
      assertTrue(!g.get(spared).decay(), spared + " has no weight decay");
    }
    for (String decayed :
        List.of(
            "patch_embed.proj.weight",
            "blocks.3.attn.qkv.weight",
            "blocks.3.mlp.fc2.weight",
            "head.weight")) {
      assertTrue(g.get(decayed).decay(), decayed + " has weight decay");
    }
    // without layer decay the ranges merge: per block, weight, bias, weight, ... alternate
    assertTrue(ParamGroups.of(new ParamGroups.Rules(1f, true, ""), VIT_B).ranges().size() < 160);
    assertEquals(1, ParamGroups.of(ParamGroups.Rules.NONE, VIT_B).ranges().size());
  }

  @Test
  void aLinearProbeTrainsTheHeadAlone() {
    ParamGroups probe = ParamGroups.of(new ParamGroups.Rules(1f, false, "(?!head\\.).*"), VIT_B);
    assertEquals(List.of("head.weight", "head.bias"), List.copyOf(byName(probe, VIT_B).keySet()));
    assertEquals(1, probe.ranges().size()); // the head's two tensors are neighbours
    assertEquals(768_000 + 1000, probe.ranges().get(0).count());
  }

  /**
   * A --freeze pattern that backtracks without end (seventeen .* then a character no name has) took
   * minutes on ViT-B's first parameter: refused in one line naming the setting, within the bound on
   * characters read.
   */
  @Test
  void aCatastrophicFreezePatternIsRefusedNotRunForMinutes() {
    String pattern = ".*".repeat(17) + "!";
    ConfigException e =
        assertThrows(
            ConfigException.class,
            () -> ParamGroups.of(new ParamGroups.Rules(1f, false, pattern), VIT_B));
    assertTrue(
        e.getMessage().startsWith("ramtrain.train.freeze = '" + pattern + "'"), e.getMessage());
    assertTrue(e.getMessage().contains("simplify it"), e.getMessage());
  }

  @Test
  void aRanksShareIsNumberedFromItsFirstElement() {
    ParamGroups.Layout whole = ParamGroups.Layout.whole(VIT_B);
    ParamGroups.Rules rules = new ParamGroups.Rules(0.5f, true, "");
    long from = 1_000_000;
    ParamGroups share = whole.share(from, 2_000_000).groups(rules);
    ParamGroups all = whole.groups(rules);
    long covered = 0;
    for (ParamGroups.Range r : share.ranges()) {
      ParamGroups.Range same = all.within(r.offset() + from, r.offset() + from + 1).get(0);
      assertEquals(same.lrScale(), r.lrScale());
      assertEquals(same.decay(), r.decay());
      covered += r.count();
    }
    assertEquals(1_000_000, covered);
  }

  /**
   * timm's group matchers for a ConvNeXt-T (stem; 18 blocks, each stage's downsampling beside its
   * first block; head: ids 0..19) and a ResNet-18 (conv1, bn1; layerN.M: 8 blocks; fc: ids 0..9),
   * the scales 0.75^(L - id) computed by hand.
   */
  @Test
  void layerDecayFollowsTimmsGroupsForConvNeXtAndResNet() {
    List<Parameters.Entry> convnext =
        slab(ModelSpec.parse("convnext_tiny", new ImageShape(224, 224, 3)));
    Map<String, ParamGroups.Range> c =
        byName(ParamGroups.of(new ParamGroups.Rules(0.75f, true, ""), convnext), convnext);
    assertEquals((float) Math.pow(0.75, 19), c.get("stem.0.weight").lrScale());
    assertEquals((float) Math.pow(0.75, 18), c.get("stages.0.blocks.0.conv_dw.weight").lrScale());
    assertEquals((float) Math.pow(0.75, 16), c.get("stages.0.blocks.2.gamma").lrScale());
    assertEquals((float) Math.pow(0.75, 15), c.get("stages.1.downsample.1.weight").lrScale());
    assertEquals((float) Math.pow(0.75, 15), c.get("stages.1.blocks.0.mlp.fc1.weight").lrScale());
    assertEquals((float) Math.pow(0.75, 4), c.get("stages.2.blocks.8.norm.bias").lrScale());
    assertEquals(0.75f, c.get("stages.3.blocks.2.mlp.fc2.weight").lrScale());
    assertEquals(1f, c.get("head.norm.weight").lrScale());
    assertEquals(1f, c.get("head.fc.weight").lrScale());
    List<Parameters.Entry> resnet = slab(ModelSpec.parse("resnet18", new ImageShape(224, 224, 3)));
    Map<String, ParamGroups.Range> r =
        byName(ParamGroups.of(new ParamGroups.Rules(0.75f, true, ""), resnet), resnet);
    assertEquals((float) Math.pow(0.75, 9), r.get("conv1.weight").lrScale());
    assertEquals((float) Math.pow(0.75, 9), r.get("bn1.bias").lrScale());
    assertEquals((float) Math.pow(0.75, 8), r.get("layer1.0.bn1.weight").lrScale());
    assertEquals((float) Math.pow(0.75, 5), r.get("layer2.1.conv2.weight").lrScale());
    assertEquals((float) Math.pow(0.75, 4), r.get("layer3.0.downsample.0.weight").lrScale());
    assertEquals(0.75f, r.get("layer4.1.bn2.weight").lrScale());
    assertEquals(1f, r.get("fc.bias").lrScale());
  }

  @Test
  void layerDecayOnAModelWithoutBlocksIsRefusedNotIgnored() {
    List<Parameters.Entry> cnn = slab(ModelSpec.parse("cnn:c8-p-f16-10", new ImageShape(8, 8, 3)));
    var e =
        assertThrows(
            IllegalArgumentException.class,
            () -> ParamGroups.of(new ParamGroups.Rules(0.75f, true, ""), cnn));
    assertTrue(e.getMessage().contains("this model has none"), e.getMessage());
  }

  @Test
  void badRulesAreRefused() {
    assertThrows(IllegalArgumentException.class, () -> new ParamGroups.Rules(0f, true, ""));
    assertThrows(IllegalArgumentException.class, () -> new ParamGroups.Rules(1.5f, true, ""));
    assertThrows(IllegalArgumentException.class, () -> new ParamGroups.Rules(1f, true, "(("));
  }
}
