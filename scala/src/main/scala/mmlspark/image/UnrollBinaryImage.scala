package mmlspark.image

import mmlspark.contracts.{RowResults, SchemaUtils, StageReadable, StageWritable}
import org.apache.spark.ml.linalg.{SQLDataTypes, Vector}
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{Column, Dataset}
import org.apache.spark.sql.types.{DataType, StructType}
import org.opencv.core.{Mat, Size}
import org.opencv.imgproc.Imgproc

/** Decodes encoded image bytes, optionally resizes them to `height` x `width`, and unrolls them
  * into a vector like [[UnrollImage]], in one step with no image column in between. A row that
  * cannot be decoded gets a null vector and an error message.
  */
final class UnrollBinaryImage(override val uid: String)
    extends HasDecodeParams
    with UnrollBinaryImageDecls
    with StageWritable {

  def this() = this(Identifiable.randomUID("UnrollBinaryImage"))

  setDefault(
    outputCol -> "unrolled",
    height -> 0,
    width -> 0
  )

  override protected def outputDataType: DataType = SQLDataTypes.VectorType

  override protected def checkSchema(schema: StructType): Unit =
    SchemaUtils.require(
      this,
      ($(height) == 0) == ($(width) == 0),
      "height and width must both be 0 or both be positive"
    )

  override protected def rowResults(dataset: Dataset[_], input: Column): Column = {
    val decode = decoder
    val (h, w) = ($(height), $(width))
    RowResults
      .udf1 { (bytes: Array[Byte]) =>
        val decoded = decode(bytes)
        val sized =
          if (h == 0) decoded
          else {
            val out = new Mat()
            try Imgproc.resize(decoded, out, new Size(w, h))
            finally decoded.release()
            out
          }
        try Unrolling.toVector(sized): Vector
        finally sized.release()
      }
      .apply(input)
  }

  override def copy(extra: ParamMap): UnrollBinaryImage = defaultCopy(extra)
}

object UnrollBinaryImage extends StageReadable[UnrollBinaryImage]
