/*
 * JNI over libjpeg-turbo: decodes only a region of a JPEG, optionally scaled in the DCT by 1/2,
 * 1/4 or 1/8, into memory the caller owns. Rows above the region are skipped
 * (jpeg_skip_scanlines: no colour conversion or upsampling), rows below are never decoded, and
 * columns outside it are cropped (jpeg_crop_scanline: no IDCT). The region is widened by one iMCU
 * (16 pixels) on every side before decoding and cut back after: fancy upsampling treats the edge
 * of what it decodes as the image's edge, and the margin keeps those pixels out of the region, so
 * the result equals the whole image's decode cropped (JpegRegionDecoderTest checks this against
 * OpenCV's decoder, which uses the same library).
 *
 * Built by build.sh with the etl module (skipped, with a warning, where gcc or jpeglib.h is
 * missing); loaded by JpegRegionDecoder.java.
 */
#include <jni.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jpeglib.h>

#define MARGIN 16

struct error_exit {
  struct jpeg_error_mgr mgr;
  jmp_buf jump;
  int strict; /* warnings (corrupt data libjpeg would paper over with grey) are errors */
  char message[JMSG_LENGTH_MAX];
};

static void on_error(j_common_ptr info) {
  struct error_exit *err = (struct error_exit *) info->err;
  (*info->err->format_message)(info, err->message);
  longjmp(err->jump, 1);
}

/*
 * Warnings (such as extraneous bytes, or data that ends early) are ignored, as OpenCV's decoder
 * ignores them, when decoding sources; a shard's JPEGs were written whole, so there a warning means
 * damage, and a strict decode fails on it rather than return grey pixels.
 */
static void on_message(j_common_ptr info, int level) {
  struct error_exit *err = (struct error_exit *) info->err;
  if (level < 0 && err->strict) {
    (*info->err->format_message)(info, err->message);
    longjmp(err->jump, 1);
  }
}

/*
 * Returns NULL on success, else why not: a colour space or precision this path does not convert
 * as OpenCV does, or a decoding error. Either way the caller decodes the whole image through
 * OpenCV, which reports errors its own way.
 */
static const char *decode(const unsigned char *data, unsigned long size, int reduce, int x, int y,
                          int w, int h, int channels, unsigned char *out, char *message,
                          int strict, int full_width, int full_height) {
  struct jpeg_decompress_struct info;
  struct error_exit err;
  unsigned char *volatile row = NULL; /* volatile: read after longjmp */
  const char *result = NULL;
  info.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = on_error;
  err.mgr.emit_message = on_message;
  err.strict = strict;
  jpeg_create_decompress(&info);
  if (setjmp(err.jump)) {
    strncpy(message, err.message, JMSG_LENGTH_MAX);
    free(row);
    jpeg_destroy_decompress(&info);
    return message;
  }
  jpeg_mem_src(&info, data, size);
  jpeg_read_header(&info, TRUE);
  if (info.data_precision != 8) {
    result = "unsupported: not an 8-bit JPEG";
  } else if (channels == 3 && info.jpeg_color_space != JCS_YCbCr && info.jpeg_color_space != JCS_RGB
             && info.jpeg_color_space != JCS_GRAYSCALE) {
    result = "unsupported: colour space (CMYK or YCCK)";
  } else if (channels == 1 && info.jpeg_color_space != JCS_YCbCr
             && info.jpeg_color_space != JCS_GRAYSCALE) {
    result = "unsupported: colour space for grey output";
  }
  if (result) {
    jpeg_destroy_decompress(&info);
    return result;
  }
  if (full_width > 0
      && ((int) info.image_width != full_width || (int) info.image_height != full_height)) {
    snprintf(message, JMSG_LENGTH_MAX, "the JPEG is %ux%u, not the expected %dx%d",
             info.image_width, info.image_height, full_width, full_height);
    jpeg_destroy_decompress(&info);
    return message;
  }
  info.out_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  info.scale_num = 1;
  info.scale_denom = reduce;
  jpeg_start_decompress(&info);
  if (x < 0 || y < 0 || w <= 0 || h <= 0 || x + w > (int) info.output_width
      || y + h > (int) info.output_height) {
    snprintf(message, JMSG_LENGTH_MAX, "region %d,%d %dx%d outside the %ux%u image", x, y, w, h,
             info.output_width, info.output_height);
    jpeg_destroy_decompress(&info);
    return message;
  }
  int left = x - MARGIN < 0 ? 0 : x - MARGIN;
  int right = x + w + MARGIN > (int) info.output_width ? (int) info.output_width : x + w + MARGIN;
  JDIMENSION crop_x = left, crop_w = right - left;
  if (crop_x > 0 || crop_w < info.output_width) {
    jpeg_crop_scanline(&info, &crop_x, &crop_w);
  }
  int skip = (y / MARGIN - 1) * MARGIN;
  if (skip > 0) {
    jpeg_skip_scanlines(&info, skip);
  }
  row = malloc((size_t) crop_w * channels);
  JSAMPROW rows[1] = {row};
  while ((int) info.output_scanline < y + h) {
    int line = info.output_scanline;
    jpeg_read_scanlines(&info, rows, 1);
    if (line >= y) {
      memcpy(out + (size_t) (line - y) * w * channels, row + (size_t) (x - (int) crop_x) * channels,
             (size_t) w * channels);
    }
  }
  free(row);
  jpeg_abort_decompress(&info);
  jpeg_destroy_decompress(&info);
  return NULL;
}

JNIEXPORT jstring JNICALL Java_dev_ramtrain_etl_image_JpegRegionDecoder_decode(
    JNIEnv *env, jclass cls, jbyteArray data, jint length, jint reduce, jint x, jint y, jint w,
    jint h, jint channels, jlong out) {
  (void) cls;
  char message[JMSG_LENGTH_MAX];
  /* Not a critical region: decoding takes long enough that holding off the GC would hurt. */
  jbyte *bytes = (*env)->GetByteArrayElements(env, data, NULL);
  if (bytes == NULL) {
    return (*env)->NewStringUTF(env, "out of memory copying the JPEG");
  }
  const char *error = decode((const unsigned char *) bytes, (unsigned long) length, reduce, x, y, w,
                             h, channels, (unsigned char *) (intptr_t) out, message, 0, 0, 0);
  (*env)->ReleaseByteArrayElements(env, data, bytes, JNI_ABORT);
  return error == NULL ? NULL : (*env)->NewStringUTF(env, error);
}

/*
 * The same from JPEG bytes at a native address (a row of a mapped shard), strictly: a warning is an
 * error, and the JPEG must be full_width x full_height.
 */
JNIEXPORT jstring JNICALL Java_dev_ramtrain_etl_image_JpegRegionDecoder_decodeStrict(
    JNIEnv *env, jclass cls, jlong data, jint length, jint full_width, jint full_height,
    jint reduce, jint x, jint y, jint w, jint h, jint channels, jlong out) {
  (void) cls;
  char message[JMSG_LENGTH_MAX];
  const char *error = decode((const unsigned char *) (intptr_t) data, (unsigned long) length,
                             reduce, x, y, w, h, channels, (unsigned char *) (intptr_t) out,
                             message, 1, full_width, full_height);
  return error == NULL ? NULL : (*env)->NewStringUTF(env, error);
}
