package dev.ramtrain.trainer.data;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.UncheckedIOException;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * A checkpoint's recorded normalization is read back as written, and a std of 0 (or a NaN, an
 * infinity) is refused naming the file: it turned every input into NaN, and a resumed run trained
 * into all-NaN weights and exited 0.
 */
class NormalizationStateTest {
  @Test
  void aRecordedNormalizationReadsBack() {
    Normalization n =
        Normalization.fromState(
            Map.of("mean", List.of(0.5, 0.25, 0.125), "std", List.of(0.2, 0.3, 0.4)), "state.json");
    assertArrayEquals(new float[] {0.5f, 0.25f, 0.125f}, n.mean());
    assertArrayEquals(new float[] {0.2f, 0.3f, 0.4f}, n.std());
  }

  @Test
  void aStdThatIsNotPositiveAndFiniteIsRefusedNamingTheFile() {
    for (List<Double> std :
        List.of(
            List.of(0.2, 0.0, 0.4),
            List.of(-0.2, 0.3, 0.4),
            List.of(0.2, Double.NaN, 0.4),
            List.of(0.2, 0.3, Double.POSITIVE_INFINITY))) {
      UncheckedIOException e =
          assertThrows(
              UncheckedIOException.class,
              () ->
                  Normalization.fromState(
                      Map.of("mean", List.of(0.5, 0.5, 0.5), "std", std), "run/state.json"));
      assertTrue(e.getMessage().startsWith("run/state.json: normalization std"), e.getMessage());
    }
    assertThrows(
        UncheckedIOException.class,
        () ->
            Normalization.fromState(
                Map.of("mean", List.of(Double.NaN, 0.5, 0.5), "std", List.of(0.2, 0.3, 0.4)),
                "run/state.json"));
  }
}
