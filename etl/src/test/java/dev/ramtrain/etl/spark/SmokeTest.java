package dev.ramtrain.etl.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.ramtrain.etl.TestSpark;
import dev.ramtrain.etl.dataset.Dataset;
import dev.ramtrain.etl.image.Augmentation;
import dev.ramtrain.etl.image.ImageDecoder;
import dev.ramtrain.etl.image.ImageTransform;
import dev.ramtrain.etl.image.ResizeMode;
import dev.ramtrain.etl.shard.ImageShape;
import dev.ramtrain.etl.source.ImageFolderSource;
import dev.ramtrain.etl.source.SyntheticImages;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class SmokeTest {
  @TempDir Path tmp;

  @Test
  void generateAndPreprocess() throws Exception {
    new SyntheticImages(4, 10, 48, 40, 0.5, 7).writeTo(tmp.resolve("raw"));
    var options =
        new PreprocessOptions(
            new ImageTransform(
                new ImageShape(32, 32, 3), ResizeMode.SHORTER_SIDE_CROP, Augmentation.NONE),
            ImageDecoder.Kind.OPENCV,
            1L << 26,
            1L << 26,
            0.2,
            1,
            1 << 20,
            1 << 16,
            0,
            0.0,
            PreprocessOptions.Output.OFFLINE,
            tmp.resolve("out").toString(),
            false);
    var result =
        new PreprocessJob(
                TestSpark.session(), new ImageFolderSource(tmp.resolve("raw").toString()), options)
            .run();
    System.out.println(new String(dev.ramtrain.etl.shard.ManifestCodec.toJson(result.manifest())));
    Dataset ds =
        Dataset.open(
            tmp.resolve("out").toString(),
            TestSpark.session().sparkContext().hadoopConfiguration());
    long rows = 0;
    for (var split : ds.manifest().splits().values()) {
      for (var shard : split.shards()) {
        try (var reader = ds.openShard(shard, true)) {
          rows += reader.rowCount();
        }
      }
    }
    assertEquals(40, rows);
  }
}
