package mmlspark.pixels

import java.io.IOException
import java.nio.file.{
  AccessDeniedException,
  Files,
  NoSuchFileException,
  NotDirectoryException,
  Paths
}

import org.apache.hadoop.fs.Path
import org.apache.hadoop.io.IOUtils
import org.apache.spark.broadcast.Broadcast
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.types.{BinaryType, Metadata, MetadataBuilder, StringType, StructType}
import org.apache.spark.util.SerializableConfiguration

/** Reading image files on the executors. */
object ImageFiles {

  /** The session's Hadoop configuration, for the tasks that read files. */
  def hadoopConf(spark: SparkSession): Broadcast[SerializableConfiguration] =
    spark.sparkContext.broadcast(new SerializableConfiguration(spark.sessionState.newHadoopConf()))

  /** The bytes of one file, refused (before reading) when over `maxBytes`. */
  def read(path: String, conf: SerializableConfiguration, maxBytes: Long): Array[Byte] = {
    val hadoopPath = new Path(path)
    val fs = hadoopPath.getFileSystem(conf.value)
    def tooLarge(length: Long) = new UndecodableImageException(
      s"file is ${ImageLimits.megabytes(length)}, over the limit of " +
        s"${ImageLimits.megabytes(maxBytes)} per file on this executor; raise " +
        ImageLimits.MaxFileBytesKey
    )
    try {
      if (fs.getScheme == "file") {
        val file = Paths.get(hadoopPath.toUri)
        val length = Files.size(file)
        if (length > maxBytes) throw tooLarge(length)
        Files.readAllBytes(file)
      } else {
        val length = fs.getFileStatus(hadoopPath).getLen
        if (length > maxBytes) throw tooLarge(length)
        val bytes = new Array[Byte](Math.toIntExact(length))
        val in = fs.open(hadoopPath)
        try IOUtils.readFully(in, bytes, 0, bytes.length)
        finally in.close()
        bytes
      }
    } catch {
      case e: IOException =>
        throw new UndecodableImageException(s"cannot read the file: ${reason(e)}")
    }
  }

  /** Why an IO operation failed, in words (java.nio's exceptions carry only the path). */
  def reason(e: Throwable): String = e match {
    case _: AccessDeniedException => "permission denied"
    case _: NoSuchFileException => "no such file (removed while reading?)"
    case _: NotDirectoryException => "not a folder"
    case other if other.getMessage != null => other.getMessage
    case other => other.getClass.getSimpleName
  }
}

/** What `read_images` and `ImageDecoder` record on the image column they add: each image is a
  * decode, not yet run, of the column `sourceCol` (which carries the same `id` in its metadata): a
  * file path (`fromPath`) or the encoded bytes, with these settings, the image's origin taken from
  * `originCol` ("": none). A stage that decodes itself (`ImageTransformer`) then decodes the
  * source, so that Spark never runs the first decode when nothing else reads its image or error
  * column.
  */
final case class DeferredDecode(
    sourceCol: String,
    fromPath: Boolean,
    originCol: String,
    id: String,
    colorMode: String,
    applyOrientation: Boolean,
    reduceFactor: Int,
    minHeight: Int,
    minWidth: Int
) {

  def imageMetadata: Metadata =
    new MetadataBuilder()
      .putMetadata(
        DeferredDecode.Key,
        new MetadataBuilder()
          .putString("sourceCol", sourceCol)
          .putBoolean("fromPath", fromPath)
          .putString("originCol", originCol)
          .putString("id", id)
          .putString("colorMode", colorMode)
          .putBoolean("applyOrientation", applyOrientation)
          .putLong("reduceFactor", reduceFactor.toLong)
          .putLong("minHeight", minHeight.toLong)
          .putLong("minWidth", minWidth.toLong)
          .build()
      )
      .build()

  /** `metadata` (the source column's) with this decode's id added. */
  def sourceMetadata(metadata: Metadata): Metadata =
    new MetadataBuilder().withMetadata(metadata).putString(DeferredDecode.SourceKey, id).build()
}

object DeferredDecode {
  val Key = "mmlsparkDeferredDecode"
  val SourceKey = "mmlsparkDecodeSource"

  /** The deferred decode behind `column` of `schema`, if its metadata names one and its source
    * column is still there, unchanged (same name and type, same id).
    */
  def of(schema: StructType, column: String): Option[DeferredDecode] =
    schema.fields.find(_.name == column).map(_.metadata).filter(_.contains(Key)).flatMap { m =>
      val d = m.getMetadata(Key)
      val decode = DeferredDecode(
        d.getString("sourceCol"),
        d.getBoolean("fromPath"),
        d.getString("originCol"),
        d.getString("id"),
        d.getString("colorMode"),
        d.getBoolean("applyOrientation"),
        d.getLong("reduceFactor").toInt,
        d.getLong("minHeight").toInt,
        d.getLong("minWidth").toInt
      )
      val sourceType = if (decode.fromPath) StringType else BinaryType
      schema.fields
        .find(f => f.name == decode.sourceCol && f.dataType == sourceType)
        .filter(f => f.metadata.contains(SourceKey) && f.metadata.getString(SourceKey) == decode.id)
        .filter(_ => decode.originCol.isEmpty || schema.fieldNames.contains(decode.originCol))
        .map(_ => decode)
    }
}
