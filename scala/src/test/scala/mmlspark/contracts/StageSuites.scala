package mmlspark.contracts

import java.io.IOException
import java.util.UUID

import scala.reflect.{classTag, ClassTag}

import org.apache.spark.ml.{Estimator, Model, PipelineStage, Transformer}
import org.apache.spark.ml.param.Params
import org.apache.spark.ml.util.{MLReadable, MLWritable}
import org.apache.spark.sql.{DataFrame, SparkSession}
import org.apache.spark.sql.streaming.Trigger
import org.scalatest.funsuite.AnyFunSuite

/** How a stage's output behaves when its input is a stream. */
sealed trait Streaming
object Streaming {

  /** Works in append mode (row-wise stages). */
  case object Append extends Streaming

  /** Works in complete mode (aggregations). */
  case object Complete extends Streaming

  /** Is refused by Spark with an error whose message contains `fragment`. */
  final case class Refused(fragment: String) extends Streaming
}

/** A configured stage, the input it is given, and a check of its output (used on batch and on
  * streaming output alike, so it must not depend on how rows are partitioned).
  */
final case class TestObject[S <: PipelineStage](
    stage: S,
    input: DataFrame,
    check: DataFrame => Unit,
    streaming: Streaming = Streaming.Append
)

/** The standard tests every public stage gets: its params, and save/load. */
abstract class StageSuite[S <: PipelineStage: ClassTag] extends AnyFunSuite {

  lazy val spark: SparkSession = SparkTestSession.spark

  /** The public stage classes this suite covers (checked by `CoverageSuite`). */
  def stagesCovered: Seq[Class[_]] = Seq(classTag[S].runtimeClass)

  /** Configured stages with their inputs; evaluated inside the tests only. */
  def testObjects: Seq[TestObject[S]]

  protected def name: String = classTag[S].runtimeClass.getSimpleName

  test(s"$name: every param is documented, readable through its getter and kept by copy") {
    testObjects.foreach(o => StageChecks.checkParams(o.stage))
  }

  test(s"$name: save, save again fails, overwrite, load gives equal params") {
    testObjects.foreach(o => StageChecks.checkReadWrite(o.stage))
  }

  /** Runs `f` on `input` read as a stream and returns the output once all input is done. */
  protected def streamed(input: DataFrame, streaming: Streaming)(
      f: DataFrame => DataFrame
  ): DataFrame = {
    val dir = SparkTestSession.tempDir("stream-in") + "/data"
    input.write.parquet(dir)
    val stream = spark.readStream.schema(input.schema).parquet(dir)
    val table = "stream_" + UUID.randomUUID().toString.replace("-", "")
    val mode = if (streaming == Streaming.Complete) "complete" else "append"
    val query = f(stream).writeStream
      .format("memory")
      .queryName(table)
      .outputMode(mode)
      .trigger(Trigger.AvailableNow())
      .start()
    query.awaitTermination()
    spark.table(table)
  }

  protected def checkStreaming(o: TestObject[_], transform: DataFrame => DataFrame): Unit =
    o.streaming match {
      case Streaming.Refused(fragment) =>
        val error = intercept[Exception](streamed(o.input, o.streaming)(transform))
        val messages =
          Iterator.iterate[Throwable](error)(_.getCause).takeWhile(_ != null).map(_.getMessage)
        assert(
          messages.exists(m => m != null && m.contains(fragment)),
          s"expected '$fragment' in $error"
        )
      case mode => o.check(streamed(o.input, mode)(transform))
    }
}

/** Standard tests for a Transformer: output checked on a batch and on a stream, and the loaded
  * stage transforms exactly like the original.
  */
abstract class TransformerSuite[T <: Transformer: ClassTag] extends StageSuite[T] {

  test(s"$name: transform of a batch DataFrame") {
    testObjects.foreach(o => o.check(o.stage.transform(o.input)))
  }

  test(s"$name: transform of a streaming DataFrame") {
    testObjects.foreach(o => checkStreaming(o, df => o.stage.transform(df)))
  }

  test(s"$name: the loaded stage transforms like the original") {
    testObjects.foreach { o =>
      val loaded = StageChecks.saveAndLoad(o.stage)
      StageChecks.assertSameRows(o.stage.transform(o.input), loaded.transform(o.input))
    }
  }
}

/** Standard tests for an Estimator and the Model it fits: fit on a batch, the model's output
  * checked on a batch and on a stream, and both stages' params and save/load.
  */
abstract class EstimatorSuite[E <: Estimator[M]: ClassTag, M <: Model[M]: ClassTag]
    extends StageSuite[E] {

  override def stagesCovered: Seq[Class[_]] = super.stagesCovered :+ classTag[M].runtimeClass

  test(s"$name: fit, then transform a batch DataFrame") {
    testObjects.foreach { o =>
      val model = o.stage.fit(o.input)
      assert(classTag[M].runtimeClass.isInstance(model))
      o.check(model.transform(o.input))
    }
  }

  test(s"$name: the fitted model transforms a streaming DataFrame") {
    testObjects.foreach { o =>
      val model = o.stage.fit(o.input)
      checkStreaming(o, df => model.transform(df))
    }
  }

  test(s"$name: the fitted model keeps its params and output through save and load") {
    testObjects.foreach { o =>
      val model = o.stage.fit(o.input)
      StageChecks.checkParams(model)
      StageChecks.checkReadWrite(model)
      StageChecks.assertSameRows(
        model.transform(o.input),
        StageChecks.saveAndLoad(model).transform(o.input)
      )
    }
  }
}

object StageChecks extends org.scalatest.Assertions {

  /** Saves `stage` and removes `names` from the saved params, as a stage saved before those params
    * existed has them; returns the folder.
    */
  def savedWithout(stage: MLWritable, names: Set[String], prefix: String): String = {
    import org.json4s._
    import org.json4s.jackson.JsonMethods.{compact, parse}
    val dir = SparkTestSession.tempDir(prefix) + "/saved"
    stage.write.save(dir)
    val metadata = new java.io.File(dir, "metadata")
      .listFiles()
      .find(f => f.getName.startsWith("part-"))
      .get
    val saved = new String(java.nio.file.Files.readAllBytes(metadata.toPath), "UTF-8")
    val old = parse(saved).transformField {
      case (name @ ("paramMap" | "defaultParamMap"), JObject(fields)) =>
        (name, JObject(fields.filterNot(f => names(f._1))))
    }
    assert(compact(old) != compact(parse(saved)), s"none of $names was saved")
    java.nio.file.Files.write(metadata.toPath, compact(old).getBytes("UTF-8"))
    new java.io.File(dir, s"metadata/.${metadata.getName}.crc").delete()
    dir
  }

  /** Rewrites the class name in the metadata of the stage saved in `dir` to `className`, as an
    * earlier mmlspark wrote it before the stage moved to another package.
    */
  def savedAs(dir: String, className: String): Unit = {
    import org.json4s._
    import org.json4s.jackson.JsonMethods.{compact, parse}
    val meta = new java.io.File(dir, "metadata")
    val part = meta.listFiles().find(f => f.getName.startsWith("part-") && f.length > 0).get
    val saved = parse(new String(java.nio.file.Files.readAllBytes(part.toPath), "UTF-8"))
    val renamed = saved.transformField { case ("class", JString(_)) =>
      ("class", JString(className))
    }
    assert(renamed != saved, compact(saved))
    java.nio.file.Files.write(part.toPath, compact(renamed).getBytes("UTF-8"))
    new java.io.File(meta, s".${part.getName}.crc").delete()
  }

  def checkParams(stage: Params): Unit = {
    stage.params.foreach { p =>
      assert(p.doc.trim.nonEmpty, s"${stage.uid}: param ${p.name} has no doc")
      val getter = stage.getClass.getMethods.find(m =>
        m.getName == s"get${p.name.capitalize}" && m.getParameterCount == 0
      )
      assert(getter.isDefined, s"${stage.getClass.getName}: param ${p.name} has no getter")
      if (stage.isDefined(p)) assert(sameValue(getter.get.invoke(stage), stage.getOrDefault(p)))
    }
    val copied = stage.copy(org.apache.spark.ml.param.ParamMap.empty)
    assert(copied.getClass == stage.getClass && copied.uid == stage.uid)
    assertSameParams(stage, copied)
  }

  def saveAndLoad[S <: Params](stage: S): S = load(stage, saveAndLoadPath(stage))

  /** Saves `stage` in a new folder, returning its path. */
  def saveAndLoadPath(stage: Params): String = {
    val path = SparkTestSession.tempDir("stage") + "/saved"
    stage.asInstanceOf[MLWritable].write.save(path)
    path
  }

  def load[S <: Params](stage: S, path: String): S = {
    val companion = Class.forName(stage.getClass.getName + "$").getField("MODULE$").get(null)
    companion.asInstanceOf[MLReadable[S]].load(path)
  }

  def checkReadWrite(stage: Params): Unit = {
    val path = SparkTestSession.tempDir("stage") + "/saved"
    val writable = stage.asInstanceOf[MLWritable]
    writable.write.save(path)
    val error = intercept[IOException](writable.write.save(path))
    assert(error.getMessage.contains("already exists"))
    writable.write.overwrite().save(path)
    val loaded = load(stage, path)
    assert(loaded.getClass == stage.getClass)
    assert(loaded.uid == stage.uid)
    assertSameParams(stage, loaded)
  }

  def assertSameParams(expected: Params, actual: Params): Unit =
    expected.params.foreach { p =>
      assert(
        expected.isSet(p) == actual.isSet(actual.getParam(p.name)),
        s"param ${p.name}: set differs"
      )
      assert(
        expected.isDefined(p) == actual.isDefined(actual.getParam(p.name)),
        s"param ${p.name}: defined differs"
      )
      if (expected.isDefined(p)) {
        val (e, a) = (expected.getOrDefault(p), actual.getOrDefault(actual.getParam(p.name)))
        assert(sameValue(e, a), s"param ${p.name}: expected $e but found $a")
      }
    }

  def sameValue(expected: Any, actual: Any): Boolean = (expected, actual) match {
    case (e: Params, a: Params) =>
      e.getClass == a.getClass && e.uid == a.uid && { assertSameParams(e, a); true }
    case (e: Array[_], a: Array[_]) =>
      e.length == a.length && e.zip(a).forall { case (x, y) => sameValue(x, y) }
    case (e, a) => e == a
  }

  /** The same rows, in any order (binary and nested values compared by content). */
  def assertSameRows(expected: DataFrame, actual: DataFrame): Unit = {
    assert(expected.schema.fieldNames.toSeq == actual.schema.fieldNames.toSeq)
    def rows(df: DataFrame) = df.collect().map(r => canonical(r).toString).sorted.toSeq
    assert(rows(expected) == rows(actual))
  }

  /** A value with byte arrays, arrays and rows turned into comparable sequences. */
  def canonical(value: Any): Any = value match {
    case r: org.apache.spark.sql.Row => r.toSeq.map(canonical)
    case b: Array[Byte] => b.toSeq
    case a: Array[_] => a.toSeq.map(canonical)
    case s: scala.collection.Seq[_] => s.toSeq.map(canonical)
    case other => other
  }

}
