package mmlspark.opencv

import mmlspark.contracts.SparkTestSession
import mmlspark.image.ImageDecoder
import mmlspark.pixels.OpenCV
import org.apache.spark.sql.{DataFrame, Row}
import org.apache.spark.sql.types.{BinaryType, StringType, StructField, StructType}
import org.opencv.core.{Core, CvType, Mat, MatOfByte, Size}
import org.opencv.imgcodecs.Imgcodecs
import org.opencv.imgproc.Imgproc
import org.scalatest.funsuite.AnyFunSuite

/** `ImageTransformer` on encoded bytes: decoding in the same pass, at full size bit-exact with
  * `ImageDecoder` followed by the same operations, and at the JPEG scale the first resize allows
  * exactly as OpenCV's own reduced decoding gives it.
  */
class FusedDecodeSuite extends AnyFunSuite {
  private lazy val spark = SparkTestSession.spark

  private def encode(mat: Mat, ext: String): Array[Byte] = {
    val buffer = new MatOfByte()
    try {
      assert(Imgcodecs.imencode(ext, mat, buffer))
      buffer.toArray
    } finally buffer.release()
  }

  /** A photo-like picture: smooth random texture, so that it compresses like a photo. */
  private def picture(height: Int, width: Int, seed: Int): Mat = {
    OpenCV.ensureLoaded()
    val small = new Mat(height / 20, width / 20, CvType.CV_8UC3)
    Core.setRNGSeed(seed)
    Core.randu(small, 0, 256)
    val big = new Mat()
    Imgproc.resize(small, big, new Size(width, height), 0, 0, Imgproc.INTER_CUBIC)
    small.release()
    big
  }

  /** A 4000x3000 JPEG (12 MP, the size of a camera-trap photo). */
  private lazy val photo: Array[Byte] = {
    val mat = picture(3000, 4000, 7)
    try encode(mat, ".jpg")
    finally mat.release()
  }

  private lazy val files: DataFrame = {
    val png = {
      val mat = picture(120, 160, 3)
      try encode(mat, ".png")
      finally mat.release()
    }
    val rows = Seq(
      Row("photo.jpg", photo),
      Row("small.png", png),
      Row("notes.jpg", "not an image".getBytes("UTF-8")),
      Row("missing.jpg", null)
    )
    val schema = StructType(
      Seq(StructField("path", StringType), StructField("content", BinaryType))
    )
    spark.createDataFrame(spark.sparkContext.parallelize(rows, 2), schema)
  }

  private def byPath(df: DataFrame, column: String): Map[String, (Any, String)] =
    df.collect()
      .map { r =>
        val errorCol = if (column == "transformed") "transformError" else "error"
        r.getAs[String]("path") -> (r.get(r.fieldIndex(column)), r.getAs[String](errorCol))
      }
      .toMap

  private def pixels(image: Row): Seq[Int] =
    image.getAs[Array[Byte]]("data").toSeq.map(_ & 0xff)

  private def matPixels(mat: Mat): Seq[Int] = {
    val out = new Array[Byte]((mat.total() * mat.channels()).toInt)
    mat.get(0, 0, out)
    out.toSeq.map(_ & 0xff)
  }

  test(
    "encoded bytes with reducedDecode off: bit-exact with ImageDecoder then the same operations"
  ) {
    def stage(input: String) = new ImageTransformer()
      .setInputCol(input)
      .setToTensor(true)
      .setReducedDecode(false)
      .resize(224, 224)
      .normalize(Array(0.485, 0.456, 0.406), Array(0.229, 0.224, 0.225), 1.0 / 255)
    val fused = byPath(stage("content").transform(files), "transformed")
    val decoded = new ImageDecoder().setInputCol("content").transform(files)
    val twoStep = byPath(stage("image").transform(decoded), "transformed")
    for (name <- Seq("photo.jpg", "small.png")) {
      assert(fused(name)._2 == null, String.valueOf(fused(name)._2))
      assert(fused(name)._1.asInstanceOf[scala.collection.Seq[Float]].length == 3 * 224 * 224)
      assert(fused(name)._1 == twoStep(name)._1, name)
    }
    assert(fused("notes.jpg")._1 == null)
    assert(fused("notes.jpg")._2.contains("not a decodable image"), fused("notes.jpg")._2)
    assert(fused("missing.jpg")._2 == "no input image (null)")
  }

  test("reducedDecode decodes at the smallest JPEG scale the first resize allows, as OpenCV does") {
    val flags = Imgcodecs.IMREAD_IGNORE_ORIENTATION
    def reference(mode: Int, ops: Mat => Mat): Seq[Int] = {
      val buffer = new MatOfByte(photo: _*)
      val decoded = Imgcodecs.imdecode(buffer, mode | flags)
      buffer.release()
      val out = ops(decoded)
      decoded.release()
      try matPixels(out)
      finally out.release()
    }
    def resized(height: Int, width: Int)(in: Mat): Mat = {
      val out = new Mat()
      Imgproc.resize(in, out, new Size(width, height), 0, 0, Imgproc.INTER_LINEAR)
      out
    }
    def flipped(in: Mat): Mat = {
      val out = new Mat()
      Core.flip(in, out, 1)
      out
    }
    def run(stage: ImageTransformer): Seq[Int] = {
      val (image, error) = byPath(stage.setInputCol("content").transform(files), "transformed")(
        "photo.jpg"
      )
      assert(error == null, String.valueOf(error))
      pixels(image.asInstanceOf[Row])
    }
    // 224 x 224 from 3000 x 4000: 1/8 (375 x 500) still covers it.
    assert(
      run(new ImageTransformer().resize(224, 224)) ==
        reference(Imgcodecs.IMREAD_REDUCED_COLOR_8, resized(224, 224))
    )
    // 600 rows: 1/8 gives 375, 1/4 gives 750.
    assert(
      run(new ImageTransformer().resize(600, 200)) ==
        reference(Imgcodecs.IMREAD_REDUCED_COLOR_4, resized(600, 200))
    )
    // A pixel-wise flip before the resize keeps the reduction.
    assert(
      run(new ImageTransformer().flip(1).resize(224, 224)) ==
        reference(Imgcodecs.IMREAD_REDUCED_COLOR_8, m => resized(224, 224)(flipped(m)))
    )
    // Shorter side 256 of 3000 x 4000: 1/8 (375 x 500) covers 256 x 256; 256 x 341 out.
    assert(
      run(new ImageTransformer().resize(256, keepAspectRatio = true)) ==
        reference(Imgcodecs.IMREAD_REDUCED_COLOR_8, resized(256, 341))
    )
    // A crop before the resize is in full-size pixels: no reduction.
    def cropped(in: Mat): Mat = in.submat(0, 2000, 0, 2000).clone()
    assert(
      run(new ImageTransformer().crop(0, 0, 2000, 2000).resize(224, 224)) ==
        reference(Imgcodecs.IMREAD_COLOR, m => resized(224, 224)(cropped(m)))
    )
  }

  test("the reduced-decode target follows the operations") {
    import ImageOps.reducedDecodeTarget
    assert(reducedDecodeTarget(Seq(Resize(224, 300))) == Some((224, 300)))
    assert(
      reducedDecodeTarget(Seq(ColorFormat("RGB"), Flip(0), ResizeShorter(256))) == Some((256, 256))
    )
    assert(reducedDecodeTarget(Seq(Blur(3, 3), Resize(224, 224))).isEmpty)
    assert(reducedDecodeTarget(Seq(CenterCrop(100, 100), Resize(224, 224))).isEmpty)
    assert(reducedDecodeTarget(Seq(Flip(1))).isEmpty)
    assert(reducedDecodeTarget(Nil).isEmpty)
  }
}
