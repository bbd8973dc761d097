package mmlspark.featurize

import mmlspark.contracts.{SparkTestSession, TestObject, TransformerSuite}
import org.apache.spark.ml.attribute.{Attribute, NominalAttribute}
import org.apache.spark.sql.DataFrame

object ConversionFixtures {
  import SparkTestSession.spark.implicits._

  /** id, text (one that is no number), an int (one too large for a byte) and a species. */
  def table: DataFrame = Seq(
    (0, Some("12"), Some(1), Some("fox")),
    (1, Some("x"), Some(200), Some("deer")),
    (2, None, None, None),
    (3, Some("-4"), Some(-3), Some("fox"))
  ).toDF("id", "s", "i", "sp")

  def byId(out: DataFrame, column: String): Map[Int, Any] =
    out.select("id", column).collect().map(r => r.getInt(0) -> r.get(1)).toMap
}

class DataConversionSuite extends TransformerSuite[DataConversion] {
  import ConversionFixtures._

  // Hand-worked: text that is no number and 200 as a byte become null.
  override def testObjects: Seq[TestObject[DataConversion]] = Seq(
    TestObject(
      new DataConversion().setCols(Array("s")).setConvertTo("long"),
      table,
      out => assert(byId(out, "s") == Map(0 -> 12L, 1 -> null, 2 -> null, 3 -> -4L))
    ),
    TestObject(
      new DataConversion().setCols(Array("i")).setConvertTo("byte"),
      table,
      out => assert(byId(out, "i") == Map(0 -> 1.toByte, 1 -> null, 2 -> null, 3 -> (-3).toByte))
    )
  )

  test(
    "toCategorical indexes in place with the levels in the metadata; clearCategorical undoes it"
  ) {
    val indexed = new DataConversion().setCols(Array("sp")).setConvertTo("toCategorical")
    val out = indexed.transform(table)
    assert(out.columns.toSeq == table.columns.toSeq)
    assert(byId(out, "sp") == Map(0 -> 1, 1 -> 0, 2 -> 2, 3 -> 1)) // deer, fox; null after
    val attribute = Attribute.fromStructField(out.schema("sp")).asInstanceOf[NominalAttribute]
    assert(attribute.values.get.toSeq == Seq("deer", "fox"))
    val back = new DataConversion().setCols(Array("sp")).setConvertTo("clearCategorical")
    assert(byId(back.transform(out), "sp") == byId(table, "sp"))
  }

  test("misuse fails before any job, naming the stage") {
    def refused(stage: DataConversion, fragment: String): Unit = {
      val error = intercept[IllegalArgumentException](stage.transformSchema(table.schema))
      assert(error.getMessage.contains(stage.uid) && error.getMessage.contains(fragment))
    }
    refused(new DataConversion().setConvertTo("long"), "param 'cols' must be set")
    refused(new DataConversion().setCols(Array("s")), "param 'convertTo' must be set")
    refused(
      new DataConversion().setCols(Array("i")).setConvertTo("date"),
      "convertTo 'date' takes a string or long column, but column 'i' is int"
    )
    refused(
      new DataConversion().setCols(Array("i")).setConvertTo("clearCategorical"),
      "column 'i' carries no levels"
    )
    intercept[IllegalArgumentException](new DataConversion().setConvertTo("int"))
  }
}
