package mmlspark.image

import mmlspark.pixels.ImageSchemaUtils
import org.apache.spark.ml.linalg.{DenseVector, Vector}
import org.opencv.core.Mat

/** Flattening images into vectors, shared by [[UnrollImage]] and [[UnrollBinaryImage]]. */
private[image] object Unrolling {

  /** The samples of `mat` as doubles in CHW order (all of channel 0, then channel 1, ...), channels
    * in the image's own order, values exactly as stored (0-255 for 8-bit).
    */
  def toVector(mat: Mat): Vector = {
    val image = ImageSchemaUtils.toStruct(mat, null)
    val channels = image.nChannels
    val plane = image.height * image.width
    val values = new Array[Double](plane * channels)
    val samples: Int => Double = org.opencv.core.CvType.depth(image.mode) match {
      case org.opencv.core.CvType.CV_8U => i => (image.data(i) & 0xff).toDouble
      case org.opencv.core.CvType.CV_16U =>
        i => ((image.data(2 * i) & 0xff) | ((image.data(2 * i + 1) & 0xff) << 8)).toDouble
      case _ =>
        val floats = java.nio.ByteBuffer
          .wrap(image.data)
          .order(java.nio.ByteOrder.LITTLE_ENDIAN)
          .asFloatBuffer()
        i => floats.get(i).toDouble
    }
    var p = 0
    while (p < plane) {
      var c = 0
      while (c < channels) {
        values(c * plane + p) = samples(p * channels + c)
        c += 1
      }
      p += 1
    }
    new DenseVector(values)
  }
}
